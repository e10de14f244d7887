#!/usr/bin/env bash
# Build the initramfs of the test VM, from Debian's packages only.
#
#   lib/make-initramfs.sh OUT.cpio.gz [PAYLOAD...]
#
# PAYLOAD: folders whose contents are copied into /selftests (or single files,
# copied there by name).  The image holds:
#   /init                   lib/guest-init.sh
#   /selftests/run-in-guest.sh   lib/run-in-guest.sh (the default payload script)
#   /bin/busybox            busybox-static, with its applet links
#   btrfs, mkfs.btrfs, btrfstune  from btrfs-progs
#   the shared libraries (and the dynamic loader) that these and every
#   dynamic ELF file of the payload need, found with ldd
#   /dev/console            (written into the archive directly: no mknod)
# Needs no root: the archive is written with root as the owner of everything.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/common.sh"

HERE=$RESTRIPER_ROOT/lib # the guest side: run-in-guest.sh, guest-init.sh
BTRFS_TOOLS=(/bin/btrfs /sbin/mkfs.btrfs /bin/btrfstune)

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
[ $# -ge 1 ] || usage 2
case "$1" in -h | --help) usage ;; esac
OUT=$1
shift
for p in "$@"; do
	[ -e "$p" ] || die "payload $p does not exist"
done

ensure_packages busybox-static btrfs-progs cpio gzip

# set -e ends the script without a word: say which command failed.
trap 'log "failed (status $?) at line $LINENO: $BASH_COMMAND"' ERR

STAGE=$(mktemp -d)
# shellcheck disable=SC2064 # expand now
trap "rm -rf '$STAGE'" EXIT

mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,dev,proc,sys,tmp,mnt,root,etc,run,var/tmp,selftests}
chmod 1777 "$STAGE/tmp" "$STAGE/var/tmp"

# --- busybox and its applets ----------------------------------------------
cp /bin/busybox "$STAGE/bin/busybox"
while IFS= read -r applet; do
	[ -e "$STAGE/$applet" ] || [ -L "$STAGE/$applet" ] || ln -s /bin/busybox "$STAGE/$applet"
done < <("$STAGE/bin/busybox" --list-full)
[ -L "$STAGE/bin/sh" ] || die "busybox has no sh applet?"

# --- btrfs-progs ----------------------------------------------------------
for t in "${BTRFS_TOOLS[@]}"; do
	[ -x "$t" ] || die "$t is missing (btrfs-progs installed?)"
	rm -f "$STAGE$t" # a busybox applet of the same name loses
	cp "$t" "$STAGE$t"
done

# --- payload --------------------------------------------------------------
for p in "$@"; do
	if [ -d "$p" ]; then
		cp -a "$p/." "$STAGE/selftests/"
	else
		cp -a "$p" "$STAGE/selftests/"
	fi
done
if [ -e "$STAGE/selftests/run-in-guest.sh" ]; then
	log "the payload's run-in-guest.sh is replaced by lib/run-in-guest.sh"
fi
install -m 0755 "$HERE/run-in-guest.sh" "$STAGE/selftests/run-in-guest.sh"
install -m 0755 "$HERE/guest-init.sh" "$STAGE/init"

# --- shared libraries -----------------------------------------------------
is_elf() { [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; }

# copy_lib PATH: copy the file PATH resolves to into the image, as PATH (the
# loader looks libraries up by the names ldd printed).
copy_lib() {
	[ -e "$STAGE$1" ] && return 0
	mkdir -p "$STAGE$(dirname "$1")"
	cp -L "$1" "$STAGE$1"
}

# add_libs FILE: the libraries FILE loads (ldd: "name => /path (addr)" and
# "/path/to/loader (addr)"; static files have none).
add_libs() {
	local out lib
	out=$(ldd "$1" 2>&1) || return 0 # "not a dynamic executable"
	if grep -q '=> not found' <<<"$out"; then
		die "$1 needs libraries that this machine lacks:" "$(grep '=> not found' <<<"$out")"
	fi
	while IFS= read -r lib; do
		copy_lib "$lib"
	done < <(sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' <<<"$out")
}

nlibs_before=$(find "$STAGE" -name '*.so*' | wc -l)
mapfile -d '' candidates < <(find "$STAGE" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
for f in "${candidates[@]}"; do
	is_elf "$f" && add_libs "$f"
done
[ -e "$STAGE/lib64/ld-linux-x86-64.so.2" ] || die "no dynamic loader found by ldd (for btrfs-progs)"
# Loaded with dlopen(), so ldd does not list it: glibc needs it for
# pthread_cancel (btrfs scrub aborts without it).
# (awk reads to the end: exiting early would kill ldconfig with SIGPIPE, and
# pipefail would end the script.)
libgcc=$(ldconfig -p | awk '$1 == "libgcc_s.so.1" && /x86-64/ && !found { print $NF; found = 1 }')
[ -n "$libgcc" ] || die "libgcc_s.so.1 not found (ldconfig -p)"
copy_lib "$libgcc"
nlibs=$(($(find "$STAGE" -name '*.so*' | wc -l) - nlibs_before))

# --- a few files busybox and the tests expect -------------------------------
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$STAGE/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$STAGE/etc/group"
ln -s /proc/mounts "$STAGE/etc/mtab"

# --- the archive ----------------------------------------------------------
# /dev/console as a second archive after cpio's: cpio can only archive real
# device nodes, and making one needs root.  The kernel unpacks concatenated
# archives.  newc_entry NAME MODE RDEVMAJOR RDEVMINOR: one entry, no data.
newc_entry() {
	local name=$1 namesize=$((${#1} + 1)) pad
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
		0 "$2" 0 0 1 0 0 0 0 "$3" "$4" "$namesize" 0
	printf '%s\0' "$name"
	pad=$(((4 - (110 + namesize) % 4) % 4))
	[ "$pad" -eq 0 ] || head -c "$pad" /dev/zero
}
dev_archive() {
	newc_entry dev/console $((8#020600)) 5 1
	newc_entry TRAILER!!! 0 0 0
}

mkdir -p "$(dirname "$OUT")"
(
	cd "$STAGE"
	# Sorted, so that the same inputs give the same archive.
	find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --quiet
	dev_archive
) | gzip -n -6 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "$OUT: $(du -h "$OUT" | cut -f1) ($(find "$STAGE/selftests" -mindepth 1 | wc -l) payload file(s), $nlibs shared libraries)"
