// SPDX-License-Identifier: GPL-2.0
/*
 * A dry-run balance request (BTRFS_BALANCE_DRY_RUN, top-level flag bit 8 of
 * BTRFS_IOC_BALANCE_V2) on a kernel with or without the series, and what it
 * did.  Runs in the VM of bench/upstream-dry-run.sh as /init's payload
 * (restriper.run=/selftests/upstream_dry_run), on /dev/vda and /dev/vdb:
 *
 *   1. mkfs.btrfs -d single -m raid1 on the two disks, mount, write 4 files
 *      of 4 MiB, sync;
 *   2. the chunk tree's chunks (BTRFS_IOC_TREE_SEARCH on the chunk tree:
 *      logical start, length, type);
 *   3. BTRFS_IOC_BALANCE_V2 with flags = DATA | DRY_RUN, data.flags = 0 (a
 *      full data balance, were bit 8 ignored);
 *   4. the chunks again, sysfs exclusive_operation, BTRFS_IOC_BALANCE_PROGRESS,
 *      the balance item in the root tree, the kernel log's lines with
 *      "balance" since step 3;
 *   5. a control: a real data balance (the same request without bit 8), to
 *      show that the chunk comparison sees a relocation.
 *
 * The expectation comes from the kernel command line:
 *   dryrun.expect=einval    the unpatched kernel: -1/EINVAL, ext_flags 0
 *   dryrun.expect=estimate  the series: 0, ext_flags bit 0, an estimate of
 *                           every data chunk and of nothing else
 *   dryrun.kernel=LABEL     the kernel's name in the output
 * and for both: no chunk moved, exclusive_operation "none", the progress
 * ioctl ENOTCONN, no balance item.
 *
 * Output: "PASS: ..." / "FAIL: ..." per check, "RESULT kernel=... key=value
 * ..." (read by bench/upstream-dry-run.sh), "DMESG kernel=...: <line>",
 * "DRYRUN DONE status=<n>".  Exit status: 0 when every check passed, 1
 * otherwise, 2 when the set-up failed.
 *
 * The series' layout of struct btrfs_ioctl_balance_args and its flags come
 * from tools/balance-abi.h: it builds against the system's uapi headers
 * and runs on both kernels.
 *
 * Build: gcc -static -O2 -Wall -Wextra -o upstream_dry_run upstream_dry_run.c
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#include "../tools/balance-abi.h"

#ifdef BTRFS_BALANCE_DRY_RUN
_Static_assert(BTRFS_BALANCE_DRY_RUN == BALANCE_DRY_RUN, "BTRFS_BALANCE_DRY_RUN");
#endif
#ifdef BTRFS_BALANCE_EXT_ESTIMATE
_Static_assert(BTRFS_BALANCE_EXT_ESTIMATE == EXT_ESTIMATE, "EXT_ESTIMATE");
#endif
_Static_assert(sizeof(struct bal_ioctl_args) ==
	       sizeof(struct btrfs_ioctl_balance_args), "upstream's size");
_Static_assert(offsetof(struct bal_ioctl_args, stat) ==
	       offsetof(struct btrfs_ioctl_balance_args, stat), "stat");

#define MNT		"/mnt/dryrun"
#define NFILES		4
#define FILE_MIB	4
#define MAX_CHUNKS	256

static const char *label = "unknown";
static int failures;

static void check(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	failures += !ok;
}

static void __attribute__((noreturn)) setup_failed(const char *what)
{
	printf("SETUP FAILED: %s: %s\n", what, strerror(errno));
	printf("DRYRUN DONE status=2\n");
	exit(2);
}

/* The value of KEY=... on the kernel command line, or NULL. */
static const char *cmdline_get(const char *key)
{
	static char buf[4096], copy[4096];
	static bool read_once;
	size_t klen = strlen(key);
	char *tok, *save;
	FILE *f;

	if (!read_once) {
		f = fopen("/proc/cmdline", "r");
		if (!f || !fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		if (f)
			fclose(f);
		read_once = true;
	}
	/* strtok_r on a copy: the caller may ask again. */
	memcpy(copy, buf, sizeof(buf));
	for (tok = strtok_r(copy, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save))
		if (!strncmp(tok, key, klen) && tok[klen] == '=')
			return buf + (tok - copy) + klen + 1;
	return NULL;
}

/* Copy the word at @p (up to a blank) into @out. */
static void word(const char *p, char *out, size_t size)
{
	size_t n = strcspn(p, " \n");

	if (n >= size)
		n = size - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* Run @argv, its output shown only when it fails. */
static int run(char *const argv[])
{
	const char *out = "/tmp/command.out";
	char line[512];
	int status, rc;
	pid_t pid;
	FILE *f;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (rc && (f = fopen(out, "r"))) {
		printf("# %s exited with status %d:\n", argv[0], rc);
		while (fgets(line, sizeof(line), f))
			printf("#   %s", line);
		fclose(f);
	}
	return rc;
}

/* ---- the chunk tree ---- */

struct chunk {
	__u64 start, length, type;
};

struct chunks {
	int n;
	struct chunk c[MAX_CHUNKS];
};

/* Every chunk item (objectid 256, type CHUNK_ITEM, key offset = logical start). */
static int read_chunks(int fd, struct chunks *list)
{
	struct btrfs_ioctl_search_args args;
	struct btrfs_ioctl_search_key *sk = &args.key;
	__u64 min_offset = 0;

	list->n = 0;
	if (syncfs(fd))
		return -1;
	for (;;) {
		unsigned long off = 0;
		__u32 i;

		memset(&args, 0, sizeof(args));
		sk->tree_id = BTRFS_CHUNK_TREE_OBJECTID;
		sk->min_objectid = sk->max_objectid = BTRFS_FIRST_CHUNK_TREE_OBJECTID;
		sk->min_type = sk->max_type = BTRFS_CHUNK_ITEM_KEY;
		sk->min_offset = min_offset;
		sk->max_offset = (__u64)-1;
		sk->max_transid = (__u64)-1;
		sk->nr_items = 4096;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args))
			return -1;
		if (!sk->nr_items)
			return 0;
		for (i = 0; i < sk->nr_items; i++) {
			struct btrfs_ioctl_search_header sh;
			struct btrfs_chunk ci;

			memcpy(&sh, args.buf + off, sizeof(sh));
			off += sizeof(sh);
			if (sh.type == BTRFS_CHUNK_ITEM_KEY && sh.len >= sizeof(ci)) {
				if (list->n >= MAX_CHUNKS) {
					errno = E2BIG;
					return -1;
				}
				memcpy(&ci, args.buf + off, sizeof(ci));
				list->c[list->n].start = sh.offset;
				list->c[list->n].length = le64toh(ci.length);
				list->c[list->n].type = le64toh(ci.type);
				list->n++;
			}
			off += sh.len;
			min_offset = sh.offset + 1;
		}
		if (min_offset == 0)
			return 0;
	}
}

static bool has_chunk(const struct chunks *l, const struct chunk *c)
{
	int i;

	for (i = 0; i < l->n; i++)
		if (l->c[i].start == c->start && l->c[i].length == c->length &&
		    l->c[i].type == c->type)
			return true;
	return false;
}

/* Chunks of @before no longer in @after (relocated), and new ones in @after. */
static void chunk_diff(const struct chunks *before, const struct chunks *after,
		       int *gone, int *added)
{
	int i;

	*gone = *added = 0;
	for (i = 0; i < before->n; i++)
		*gone += !has_chunk(after, &before->c[i]);
	for (i = 0; i < after->n; i++)
		*added += !has_chunk(before, &after->c[i]);
}

static int count_type(const struct chunks *l, __u64 type)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++)
		n += !!(l->c[i].type & type);
	return n;
}

static void print_chunks(const char *when, const struct chunks *l)
{
	int i;

	printf("# chunks %s:", when);
	for (i = 0; i < l->n; i++)
		printf(" %llu(%s,%lluM)", (unsigned long long)l->c[i].start,
		       (l->c[i].type & BTRFS_BLOCK_GROUP_DATA) ? "data" :
		       (l->c[i].type & BTRFS_BLOCK_GROUP_METADATA) ? "meta" : "sys",
		       (unsigned long long)(l->c[i].length >> 20));
	printf("\n");
}

/* ---- the rest of the state ---- */

/* The balance item: root tree, (BALANCE_OBJECTID, TEMPORARY_ITEM, 0). */
static int balance_items(int fd)
{
	struct btrfs_ioctl_search_args args;
	struct btrfs_ioctl_search_key *sk = &args.key;

	memset(&args, 0, sizeof(args));
	sk->tree_id = BTRFS_ROOT_TREE_OBJECTID;
	sk->min_objectid = sk->max_objectid = BTRFS_BALANCE_OBJECTID;
	sk->min_type = sk->max_type = BTRFS_TEMPORARY_ITEM_KEY;
	sk->max_offset = (__u64)-1;
	sk->max_transid = (__u64)-1;
	sk->nr_items = 16;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args))
		return -1;
	return (int)sk->nr_items;
}

/* /sys/fs/btrfs/<fsid>/exclusive_operation, without its newline. */
static void exclusive_operation(int fd, char *out, size_t size)
{
	struct btrfs_ioctl_fs_info_args fi;
	char path[128];
	const __u8 *u;
	FILE *f;

	snprintf(out, size, "?");
	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi))
		return;
	u = fi.fsid;
	snprintf(path, sizeof(path),
		 "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/exclusive_operation",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		 u[10], u[11], u[12], u[13], u[14], u[15]);
	f = fopen(path, "r");
	if (!f) {
		snprintf(out, size, "unreadable (%s)", strerror(errno));
		return;
	}
	if (!fgets(out, (int)size, f))
		snprintf(out, size, "empty");
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/* The kernel log (klogctl), NUL-terminated; NULL on failure. */
static char *kernel_log(void)
{
	int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf;
	int n;

	if (size <= 0)
		return NULL;
	buf = malloc((size_t)size + 1);
	if (!buf)
		return NULL;
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, size);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/*
 * Print the lines of the kernel log containing "balance" from the @skip+1-th
 * such line on, as "<tag> kernel=<label>: <line>" ("<level>" prefix
 * dropped; @tag NULL: not printed), and copy the first of them into @first.
 * Returns how many lines with "balance" the log has in all.
 */
static int balance_lines(int skip, const char *tag, char *first, size_t size)
{
	char *log = kernel_log(), *line, *save;
	int n = 0;

	if (first)
		first[0] = '\0';
	if (!log)
		return -1;
	for (line = strtok_r(log, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strstr(line, "balance"))
			continue;
		if (line[0] == '<' && strchr(line, '>'))
			line = strchr(line, '>') + 1;
		if (n++ < skip)
			continue;
		if (tag)
			printf("%s kernel=%s: %s\n", tag, label, line);
		if (first && !first[0])
			snprintf(first, size, "%s", line);
	}
	free(log);
	return n;
}

static const char *errno_name(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case ENOTCONN: return "ENOTCONN";
	case EINPROGRESS: return "EINPROGRESS";
	case EPERM: return "EPERM";
	case ENOSPC: return "ENOSPC";
	case ENOTTY: return "ENOTTY";
	case ECANCELED: return "ECANCELED";
	default: return strerror(e);
	}
}

/* ---- main ---- */

static void make_fs(void)
{
	char *mkfs[] = { "/sbin/mkfs.btrfs", "-f", "-q", "-K", "-d", "single",
			 "-m", "raid1", "/dev/vda", "/dev/vdb", NULL };
	char buf[1 << 20];
	int i, j, fd, rc;

	rc = run(mkfs);
	if (rc) {
		errno = EIO;
		printf("# mkfs.btrfs exited with status %d\n", rc);
		setup_failed("mkfs.btrfs -d single -m raid1 /dev/vda /dev/vdb");
	}
	mkdir(MNT, 0755);
	if (mount("/dev/vda", MNT, "btrfs", 0, "device=/dev/vda,device=/dev/vdb"))
		setup_failed("mount");
	for (i = 0; i < NFILES; i++) {
		char path[64];

		snprintf(path, sizeof(path), MNT "/file%d", i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			setup_failed(path);
		for (j = 0; j < FILE_MIB; j++) {
			memset(buf, 'a' + ((i + j) % 26), sizeof(buf));
			if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
				setup_failed("write");
		}
		if (fsync(fd) || close(fd))
			setup_failed("fsync");
	}
	sync();
}

int main(void)
{
	static struct chunks before, after, control;
	struct bal_ioctl_args a, p;
	const char *v;
	char expect[32] = "", exclop[64], dmesg_first[512], lbl[64] = "unknown";
	bool want_estimate;
	int fd, ret, err, prog_ret, prog_err, items, gone, added, nbal, data_chunks;

	setvbuf(stdout, NULL, _IOLBF, 0);
	v = cmdline_get("dryrun.kernel");
	if (v) {
		word(v, lbl, sizeof(lbl));
		label = lbl;
	}
	v = cmdline_get("dryrun.expect");
	if (v)
		word(v, expect, sizeof(expect));
	if (strcmp(expect, "einval") && strcmp(expect, "estimate")) {
		printf("SETUP FAILED: dryrun.expect=einval|estimate on the kernel command line, not '%s'\n",
		       expect);
		printf("DRYRUN DONE status=2\n");
		return 2;
	}
	want_estimate = !strcmp(expect, "estimate");
	printf("# kernel %s, expecting %s\n", label,
	       want_estimate ? "0 and an estimate" : "-1/EINVAL");

	make_fs();
	fd = open(MNT, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		setup_failed("open " MNT);
	if (read_chunks(fd, &before))
		setup_failed("BTRFS_IOC_TREE_SEARCH (chunk tree)");
	print_chunks("before", &before);
	data_chunks = count_type(&before, BTRFS_BLOCK_GROUP_DATA);
	nbal = balance_lines(0, NULL, NULL, 0);

	/* The dry run: a full data balance if bit 8 were ignored. */
	memset(&a, 0, sizeof(a));
	a.flags = BALANCE_DATA | BALANCE_DRY_RUN;
	errno = 0;
	ret = ioctl(fd, BTRFS_IOC_BALANCE_V2, &a);
	err = ret < 0 ? errno : 0;
	printf("# BTRFS_IOC_BALANCE_V2 flags=0x%llx: returned %d, errno %s\n",
	       (unsigned long long)(BALANCE_DATA | BALANCE_DRY_RUN), ret, errno_name(err));

	if (read_chunks(fd, &after))
		setup_failed("BTRFS_IOC_TREE_SEARCH (chunk tree)");
	print_chunks("after", &after);
	chunk_diff(&before, &after, &gone, &added);
	exclusive_operation(fd, exclop, sizeof(exclop));
	memset(&p, 0, sizeof(p));
	prog_ret = ioctl(fd, BTRFS_IOC_BALANCE_PROGRESS, &p);
	prog_err = prog_ret < 0 ? errno : 0;
	items = balance_items(fd);
	nbal = balance_lines(nbal > 0 ? nbal : 0, "DMESG", dmesg_first,
			     sizeof(dmesg_first));

	if (want_estimate) {
		check(ret == 0, "the dry run returned 0 (returned %d, errno %s)",
		      ret, errno_name(err));
		check(a.ext_flags & EXT_ESTIMATE, "ext_flags has BTRFS_BALANCE_EXT_ESTIMATE (0x%llx)",
		      (unsigned long long)a.ext_flags);
		check(a.types[0].chunks_expected > 0,
		      "the estimate has data chunks (%llu, %llu bytes used)",
		      (unsigned long long)a.types[0].chunks_expected,
		      (unsigned long long)a.types[0].bytes_expected);
		check(a.types[0].chunks_expected == (__u64)data_chunks,
		      "the estimate counts every data chunk (%llu of the %d in the chunk tree)",
		      (unsigned long long)a.types[0].chunks_expected, data_chunks);
		check(a.types[1].chunks_expected == 0 && a.types[2].chunks_expected == 0,
		      "no metadata or system chunk in the estimate of a data balance (%llu, %llu)",
		      (unsigned long long)a.types[1].chunks_expected,
		      (unsigned long long)a.types[2].chunks_expected);
		check(a.stat.completed == 0 && a.state == 0,
		      "stat.completed and state are 0 (%llu, 0x%llx)",
		      (unsigned long long)a.stat.completed, (unsigned long long)a.state);
	} else {
		check(ret == -1 && err == EINVAL,
		      "the dry run was refused with EINVAL (returned %d, errno %s)",
		      ret, errno_name(err));
		check(a.ext_flags == 0, "ext_flags stayed 0 (0x%llx)",
		      (unsigned long long)a.ext_flags);
	}
	check(gone == 0 && added == 0 && before.n == after.n,
	      "no chunk moved: %d chunks before, %d after, %d gone, %d new",
	      before.n, after.n, gone, added);
	check(!strcmp(exclop, "none"), "exclusive_operation reads \"none\" (\"%s\")", exclop);
	check(prog_ret == -1 && prog_err == ENOTCONN,
	      "BTRFS_IOC_BALANCE_PROGRESS: ENOTCONN, no balance (returned %d, errno %s)",
	      prog_ret, errno_name(prog_err));
	check(items == 0, "no balance item in the root tree (%d)", items);

	printf("RESULT kernel=%s ret=%d errno=%s ext_flags=0x%llx est_data_chunks=%llu est_data_bytes=%llu est_meta_chunks=%llu est_sys_chunks=%llu data_chunks=%d chunks_before=%d chunks_after=%d chunks_moved=%d exclusive_operation=%s progress=%s balance_items=%d\n",
	       label, ret, errno_name(err), (unsigned long long)a.ext_flags,
	       (unsigned long long)a.types[0].chunks_expected,
	       (unsigned long long)a.types[0].bytes_expected,
	       (unsigned long long)a.types[1].chunks_expected,
	       (unsigned long long)a.types[2].chunks_expected,
	       data_chunks, before.n, after.n, gone, exclop,
	       prog_ret < 0 ? errno_name(prog_err) : "running", items);
	printf("RESULT_DMESG kernel=%s %s\n", label, dmesg_first[0] ? dmesg_first : "(none)");

	/* Control: the same request without bit 8 relocates, and the check sees it. */
	memset(&a, 0, sizeof(a));
	a.flags = BTRFS_BALANCE_DATA;
	ret = ioctl(fd, BTRFS_IOC_BALANCE_V2, &a);
	err = ret < 0 ? errno : 0;
	if (read_chunks(fd, &control))
		setup_failed("BTRFS_IOC_TREE_SEARCH (chunk tree)");
	chunk_diff(&after, &control, &gone, &added);
	print_chunks("after the control", &control);
	check(ret == 0 && gone > 0,
	      "control: the request without bit 8 is a real data balance: returned %d (errno %s), %d chunks relocated (%d data chunks)",
	      ret, errno_name(err), gone, data_chunks);
	balance_lines(nbal > 0 ? nbal : 0, "DMESG_CONTROL", dmesg_first,
		      sizeof(dmesg_first));
	check(strstr(dmesg_first, "balance: start") != NULL,
	      "control: the kernel log has its \"balance: start\" line (the log is read right)");
	printf("RESULT_CONTROL kernel=%s ret=%d errno=%s chunks_moved=%d\n",
	       label, ret, errno_name(err), gone);

	close(fd);
	if (umount(MNT))
		check(false, "umount %s: %s", MNT, strerror(errno));
	printf("DRYRUN DONE status=%d\n", failures ? 1 : 0);
	return failures ? 1 : 0;
}
