// SPDX-License-Identifier: GPL-2.0
/*
 * A balance interrupted by a crash resumes exactly: a full balance of N
 * chunks is stopped at about half way by killing the machine, and after
 * the resume the chunk tree and the kernel log show that every chunk the
 * balance started with was relocated exactly once, and no relocated copy
 * again.  The files are verified after the crash and after the resume.
 *
 * Two boots of the same disks, so two phases:
 *
 *   crash_resume_test 1|interrupt   (or restriper.crash_phase=1 on the
 *                                    kernel command line)
 *     mkfs.btrfs -d single -m raid1 on the first 3 devices (160 MiB each),
 *     data chunks that each hold one file of known content, the chunk list
 *     and the files recorded in a state file on the filesystem (committed);
 *     then a full balance (-d -m -s, no filters) is let through N/2 chunks
 *     (balance_hold_skip, HOLD_RELOCATION) and held inside the relocation
 *     of the next one (HOLD_IN_RELOCATION).  It prints the line
 *
 *         === CRASH ME ===
 *
 *     and waits forever: whoever runs it kills the machine then (no
 *     unmount, no sync).  "# " lines only, no TAP; exit status 1 when it
 *     fails before the marker.
 *
 *   crash_resume_test 2|verify      (or restriper.crash_phase=2)
 *     On the next boot, TAP: mounts with the resume thread held
 *     (HOLD_RESUME_THREAD) and checks the balance item against the state
 *     file and the chunk tree (bound, the count of committed relocations,
 *     progress), verifies the files, lets the resume run to its end and
 *     checks from the kernel log ("relocating block group") and the chunk
 *     tree that each chunk left at the crash was relocated exactly once and
 *     nothing else was, verifies the files again, checks the "balance:
 *     resume" line (the original filters, no usage=90), runs "btrfs scrub
 *     start -Bd", unmounts and runs "btrfs check --readonly
 *     --check-data-csum".
 *
 * Without a phase it skips (exit status 4).  run_selftests.sh runs it as
 * its crash stage, from /selftests/crash/ (lib/run-in-guest.sh, which runs
 * only the programs of the folder it is given, does not run it with the
 * other selftests).
 *
 * Environment: BTRFS_TEST_DEVS, the block devices (at least 3; the first 3
 * are reformatted by phase 1 and must be the same in phase 2),
 * BTRFS_TEST_MNT (default /mnt/test).  Needs CONFIG_BTRFS_DEBUG (the hold
 * points), mkfs.btrfs and btrfs in PATH, root.
 *
 * Waits are for states, with timeouts that only a hang reaches.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <sys/syscall.h>

#include "btrfs_util.h"
#include "kselftest.h"

#define NDEVS		3
#define DEV_SIZE	"160M"	/* 480 MiB in all: data chunks of 48 MiB */
#define NEW_DATA_CHUNKS	7	/* besides the one of mkfs */
#define NFILES		(NEW_DATA_CHUNKS + 1)
#define EXTENT_SIZE	SZ_1M	/* each file is written in extents of this */
#define FILE_SIZE	(2 * EXTENT_SIZE)
#define MOUNT_OPTS	"nodiscard,nossd"
#define STATE_NAME	"crash-resume.state"
#define STATE_MAGIC	"crash_resume_test state 1"
#define CRASH_MARKER	"=== CRASH ME ==="
#define ALL_TYPES	(BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA | \
			 BTRFS_BALANCE_SYSTEM)
#define RESUME_LINE	"balance: resume -d -m -s"
/* Waits that end on an event: only a hang reaches these. */
#define HANG_MS		(240 * 1000)

/* What phase 1 leaves for phase 2. */
struct state {
	__u64 bound;		/* the end of the highest chunk */
	int skip;		/* chunks let through before the hold */
	int nfiles;
	__u64 file_size;
	struct chunk_list chunks;	/* at the start of the balance */
};

static int open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	return fd < 0 ? -errno : fd;
}

/* Mount; its hold points are the ones used from then on. */
static int mount_test_fs(const struct test_env *env)
{
	int fd, ret;

	mkdir(env->mnt, 0755);
	ret = mount_fs(env, NDEVS, 0, MOUNT_OPTS);
	if (ret)
		return ret;
	fd = open_dir(env->mnt);
	if (fd < 0)
		return fd;
	ret = balance_hold_attach(fd);
	close(fd);
	return ret;
}

/* ---- The state file ---- */

static int state_write(const char *mnt, const struct state *st)
{
	char path[PATH_MAX + 64];
	FILE *f;
	int i, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", mnt, STATE_NAME);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\nbound %llu\nskip %d\nfiles %d %llu\nchunks %d\n",
		STATE_MAGIC, (unsigned long long)st->bound, st->skip,
		st->nfiles, (unsigned long long)st->file_size, st->chunks.n);
	for (i = 0; i < st->chunks.n; i++)
		fprintf(f, "chunk %llu %llu %llu\n",
			(unsigned long long)st->chunks.c[i].start,
			(unsigned long long)st->chunks.c[i].length,
			(unsigned long long)st->chunks.c[i].type);
	fprintf(f, "end\n");
	if (fflush(f) || fsync(fileno(f)))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

static int state_read(const char *mnt, struct state *st)
{
	unsigned long long a, b, c;
	char path[PATH_MAX + 64], line[256];
	int n = -1, ret = -EINVAL;
	FILE *f;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/%s", mnt, STATE_NAME);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f) ||
	    strncmp(line, STATE_MAGIC "\n", sizeof(STATE_MAGIC)))
		goto out;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "bound %llu", &a) == 1) {
			st->bound = a;
		} else if (sscanf(line, "skip %d", &st->skip) == 1) {
			continue;
		} else if (sscanf(line, "files %d %llu", &st->nfiles, &a) == 2) {
			st->file_size = a;
		} else if (sscanf(line, "chunks %d", &n) == 1) {
			if (n < 1 || n > MAX_CHUNKS)
				goto out;
		} else if (sscanf(line, "chunk %llu %llu %llu", &a, &b, &c) == 3) {
			struct chunk *ch;

			if (st->chunks.n >= MAX_CHUNKS)
				goto out;
			ch = &st->chunks.c[st->chunks.n++];
			ch->start = a;
			ch->length = b;
			ch->type = c;
		} else if (!strcmp(line, "end\n")) {
			ret = 0;
			break;
		} else {
			goto out;
		}
	}
	if (!ret && (st->chunks.n != n || !st->bound || st->nfiles < 1 ||
		     st->nfiles > NFILES || !st->file_size))
		ret = -EINVAL;
out:
	fclose(f);
	return ret;
}

/* ---- Files: each written in extents of EXTENT_SIZE ---- */

/* One extent per write: written back before the next one. */
static int write_file(const char *dir, int idx, __u64 size)
{
	return write_pattern(dir, idx, size, EXTENT_SIZE, PATTERN_DSYNC_EACH);
}

/* Every file as written; caches dropped first.  0, or -errno and @why. */
static int verify_files(const char *mnt, int nfiles, __u64 size,
			char *why, size_t why_size)
{
	__u64 bad;
	int i, ret;

	ret = drop_page_cache();
	if (ret) {
		snprintf(why, why_size, "drop_caches: %s", strerror(-ret));
		return ret;
	}
	for (i = 0; i < nfiles; i++) {
		ret = verify_pattern_file(mnt, i, size, &bad);
		if (ret) {
			snprintf(why, why_size, "f%02d: %s at offset %llu", i,
				 strerror(-ret), (unsigned long long)bad);
			return ret;
		}
	}
	return 0;
}

/* ---- Phase 1: interrupt ---- */

static int phase1_failed(const char *fmt, ...)
{
	va_list ap;

	printf("# crash_resume_test phase 1: FAILED: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return KSFT_FAIL;
}

/*
 * Preallocate (no data written) pieces of EXTENT_SIZE into fill<@idx> until
 * one of them makes the kernel allocate a data chunk: the chunks there were
 * have no free piece of EXTENT_SIZE left, and the new one has the room.
 */
static int fill_data_chunks(int mntfd, const char *mnt, int idx)
{
	__u64 total, now, off;
	char path[PATH_SIZE];
	int fd, ret;

	ret = read_fs_sysfs(mntfd, "allocation/data/total_bytes", &total);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/fill%02d", mnt, idx);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	for (off = 0;; off += EXTENT_SIZE) {
		if (off > total) {	/* a chunk holds less than its size? */
			ret = -ENOSPC;
			break;
		}
		if (fallocate(fd, 0, off, EXTENT_SIZE)) {
			ret = -errno;
			break;
		}
		ret = read_fs_sysfs(mntfd, "allocation/data/total_bytes", &now);
		if (ret || now != total)
			break;
	}
	close(fd);
	return ret;
}

/*
 * NFILES data chunks, each holding one file of FILE_SIZE (f00 in the chunk
 * of mkfs) and nothing else: each file after the first is written once the
 * chunks before have no room for its extents, into the chunk the filling
 * made; the filling is deleted at the end.
 */
static int make_data_chunks(int mntfd, const char *mnt)
{
	__u64 end = now_ms() + HANG_MS, used;
	char path[PATH_SIZE], desc[128];
	struct chunk_list l;
	int i, n, ret;

	for (i = 0; i < NFILES; i++) {
		if (i) {
			ret = fill_data_chunks(mntfd, mnt, i);
			if (ret)
				return phase1_failed("filling the data chunks before f%02d: %s",
						     i, strerror(-ret));
		}
		ret = write_file(mnt, i, FILE_SIZE);
		if (ret)
			return phase1_failed("write f%02d: %s", i, strerror(-ret));
		if (syncfs(mntfd))
			return phase1_failed("syncfs: %s", strerror(errno));
	}
	for (i = 1; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/fill%02d", mnt, i);
		if (unlink(path))
			return phase1_failed("unlink %s: %s", path, strerror(errno));
	}
	/* Freed extents leave the block groups' usage at a commit. */
	for (;;) {
		ret = read_chunks(mntfd, &l);
		if (ret)
			return phase1_failed("read the chunk tree: %s", strerror(-ret));
		for (used = 0, n = 0, i = 0; i < l.n; i++) {
			if (!(l.c[i].type & BTRFS_BLOCK_GROUP_DATA))
				continue;
			used += l.c[i].used;
			n++;
		}
		if (used == NFILES * FILE_SIZE)
			break;
		if (now_ms() > end)
			return phase1_failed("the filling was not freed: %llu bytes of data used",
					     (unsigned long long)used);
		usleep(10 * 1000);
	}
	if (n != NFILES)
		return phase1_failed("%d data chunks, not %d", n, NFILES);
	for (i = 0; i < l.n; i++)
		if ((l.c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
		    l.c[i].used != FILE_SIZE)
			return phase1_failed("%s holds %llu bytes, not one file",
					     chunk_desc(&l.c[i], desc, sizeof(desc)),
					     (unsigned long long)l.c[i].used);
	return 0;
}

/*
 * Wait until a thread is held at @point: 0, -ESRCH when the balance thread
 * returned first, -ETIMEDOUT on a hang.
 */
static int wait_held(struct balance_thread *bt, unsigned long point)
{
	__u64 end = now_ms() + HANG_MS;
	unsigned long points, held;
	int ret;

	while (now_ms() < end) {
		ret = balance_hold_get(&points, &held);
		if (ret)
			return ret;
		if (held & point)
			return 0;
		if (balance_thread_done(bt))
			return -ESRCH;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

static const char *wait_error(int ret)
{
	if (ret == -ESRCH)
		return "the balance ended first";
	if (ret == -ETIMEDOUT)
		return "timed out (a hang)";
	return strerror(-ret);
}

/* After a failure with the balance started: let it end, unmount. */
static void phase1_cleanup(struct test_env *env, int fd,
			   struct balance_thread *bt)
{
	balance_hold_set(0);
	balance_hold_skip_set(0);
	if (bt->started) {
		balance_ctl(fd, BTRFS_BALANCE_CTL_CANCEL);
		balance_thread_join(bt);
	}
	close(fd);
	umount_fs(env->mnt);
}

static int phase_interrupt(struct test_env *env)
{
	char *mkfs[11 + NDEVS] = {
		"mkfs.btrfs", "-f", "-q", "-K", "-d", "single", "-m", "raid1",
		"-b", DEV_SIZE,
	};
	struct btrfs_ioctl_balance_args args, p;
	struct balance_thread bt = { 0 };
	struct chunk_list again;
	struct state st = { 0 };
	struct kmsg k = { .fd = -1 };
	__u64 relocs[MAX_CHUNKS];
	char desc[128];
	int fd, i, n, ret;

	printf("# crash_resume_test phase 1: interrupt a full balance, then wait to be killed\n");
	for (i = 0; i < NDEVS; i++)
		mkfs[10 + i] = env->devs[i];
	mkfs[10 + NDEVS] = NULL;
	mkdir(env->mnt, 0755);
	while (!umount2(env->mnt, 0))
		;
	if (run_cmd(mkfs))
		return phase1_failed("mkfs.btrfs");
	ret = mount_test_fs(env);
	if (ret)
		return phase1_failed("mount: %s", strerror(-ret));
	fd = open_dir(env->mnt);
	if (fd < 0)
		return phase1_failed("open %s: %s", env->mnt, strerror(-fd));
	ret = balance_hold_set(0);
	if (!ret)
		ret = balance_hold_skip_set(0);
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("%s/balance_hold: %s (CONFIG_BTRFS_DEBUG's hold points)",
				     balance_hold_dir, strerror(-ret));
	}

	ret = make_data_chunks(fd, env->mnt);
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return ret;
	}
	ret = read_chunks(fd, &st.chunks);
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("read the chunk tree: %s", strerror(-ret));
	}
	st.bound = chunks_end(&st.chunks);
	st.skip = st.chunks.n / 2;
	st.nfiles = NFILES;
	st.file_size = FILE_SIZE;
	ret = state_write(env->mnt, &st);
	if (!ret && syncfs(fd))
		ret = -errno;
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("write the state file: %s", strerror(-ret));
	}
	/* The state file took no new chunk: the list is the balance's. */
	ret = read_chunks(fd, &again);
	if (ret || !same_chunks(&st.chunks, &again)) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("the chunks changed after the state file was written (%d)",
				     ret);
	}
	printf("# %d chunks (%d data, each with one file of %llu bytes), bound %llu\n",
	       st.chunks.n, NFILES, (unsigned long long)FILE_SIZE,
	       (unsigned long long)st.bound);

	/* Through half of the chunks, then held before the next one. */
	ret = kmsg_start(&k);
	if (!ret)
		ret = balance_hold_skip_set(st.skip);
	if (!ret)
		ret = balance_hold_set(HOLD_RELOCATION);
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("kmsg or hold points: %s", strerror(-ret));
	}
	memset(&args, 0, sizeof(args));
	args.flags = ALL_TYPES;
	ret = balance_thread_start(&bt, fd, &args);
	if (!ret)
		ret = wait_held(&bt, HOLD_RELOCATION);
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("the balance was not held before chunk %d: %s (balance returned %d)",
				     st.skip + 1, wait_error(ret), bt.ret);
	}
	ret = balance_progress(fd, &p);
	if (ret || p.stat.completed != (__u64)st.skip) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("held after %llu relocated chunks, not %d (progress: %d)",
				     (unsigned long long)p.stat.completed,
				     st.skip, ret);
	}

	/* On into the next chunk, and held inside its relocation. */
	ret = balance_hold_set(HOLD_IN_RELOCATION);
	if (!ret)
		ret = wait_held(&bt, HOLD_IN_RELOCATION);
	if (ret) {
		phase1_cleanup(env, fd, &bt);
		return phase1_failed("the balance was not held inside a relocation: %s (balance returned %d)",
				     wait_error(ret), bt.ret);
	}
	n = kmsg_relocations(&k, relocs, MAX_CHUNKS);
	i = n > 0 ? find_chunk(&st.chunks, relocs[n - 1]) : -1;
	printf("# %d chunks relocated, held inside the relocation of %s\n",
	       st.skip, i < 0 ? "?" : chunk_desc(&st.chunks.c[i], desc,
						sizeof(desc)));
	/* The marker on a line of its own, in one write. */
	fflush(stdout);
	ret = write(STDOUT_FILENO, "\n" CRASH_MARKER "\n",
		    sizeof(CRASH_MARKER) + 1);
	(void)ret;
	for (;;)
		pause();
}

/* ---- Phase 2: verify ---- */

/* Results of phase 2, in order: the plan. */
enum {
	T_MOUNT,
	T_STATE,
	T_BOUND,
	T_COUNT,
	T_HALF,
	T_PROGRESS,
	T_BELOW,
	T_FILES_CRASH,
	T_ENDS,
	T_ONCE,
	T_NOTHING_ELSE,
	T_NONE_LEFT,
	T_FILES_RESUME,
	T_RESUME_LINE,
	T_SCRUB,
	T_UMOUNT,
	T_CHECK,
	T_NR,
};

/* For a result's text: "" when @ret is 0, else ": <what failed>". */
static const char *err(int ret)
{
	static char buf[128];

	if (!ret)
		return "";
	snprintf(buf, sizeof(buf), ": %s", strerror(-ret));
	return buf;
}

/* Of the log since @k's start: the line with @needle, into @buf. */
static bool kmsg_line(struct kmsg *k, const char *needle, char *buf,
		      size_t size)
{
	const char *p;
	size_t len;

	buf[0] = '\0';
	if (kmsg_update(k) || !k->text)
		return false;
	p = strstr(k->text, needle);
	if (!p)
		return false;
	len = strcspn(p, "\n");
	snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), p);
	return true;
}

static int phase_verify(struct test_env *env)
{
	struct btrfs_ioctl_balance_args p;
	struct balance_item_state item;
	struct chunk_list mnt_chunks, after;
	struct kmsg k = { .fd = -1 };
	struct state st;
	__u64 relocs[MAX_CHUNKS];
	int times[MAX_CHUNKS];
	char why[256], line[256], desc[128];
	int fd = -1, i, j, n, ret, gone, left, twice, missing, other, below;
	bool mounted = false;

	ksft_print_header();
	ksft_set_plan(T_NR);
	ksft_print_msg("crash_resume_test phase 2: the resume of a balance interrupted by a crash\n");

	/* The resume thread of the mount waits until the checks are done. */
	ret = kmsg_start(&k);
	if (!ret) {
		mkdir(env->mnt, 0755);
		ret = mount_fs_held(env, NDEVS, 0, MOUNT_OPTS,
				    HOLD_RESUME_THREAD);
	}
	if (!ret) {
		mounted = true;
		fd = open_dir(env->mnt);
		ret = fd < 0 ? fd : 0;
	}
	/* The mount has the balance, running (-ENOTCONN: none). */
	if (!ret)
		ret = balance_progress(fd, &p);
	if (!ret)
		ret = balance_hold_wait(HOLD_RESUME_THREAD, HANG_MS);
	tap_result(!ret, "mount: the balance is recovered, its resume thread held%s",
		   err(ret));
	if (ret)
		goto fatal;

	ret = state_read(env->mnt, &st);
	tap_result(!ret,
		   "the state file of the interrupted boot: %d chunks, bound %llu, %d files%s",
		   st.chunks.n, (unsigned long long)st.bound, st.nfiles, err(ret));
	if (ret)
		goto fatal;

	ret = balance_item_read(fd, &item);
	if (!ret)
		ret = read_chunks(fd, &mnt_chunks);
	if (ret) {
		tap_result(false, "the balance item and the chunk tree: %s",
			   strerror(-ret));
		goto fatal;
	}
	tap_result(item.bound == st.bound,
		   "the item's bound is where the balance started: %llu (recorded %llu)",
		   (unsigned long long)item.bound, (unsigned long long)st.bound);

	for (gone = 0, i = 0; i < st.chunks.n; i++)
		gone += chunk_moved(&st.chunks, i, &mnt_chunks);
	tap_result(item.completed == (__u64)gone,
		   "the item counts the relocations that committed: %llu, chunks gone %d",
		   (unsigned long long)item.completed, gone);
	tap_result(gone >= 1 && gone <= st.chunks.n - 1,
		   "the crash came in the middle: %d of %d chunks relocated (skip %d)",
		   gone, st.chunks.n, st.skip);

	ret = balance_progress(fd, &p);
	/* The mount resumes it: RESUME joins the flags it started with. */
	tap_result(!ret && p.stat.completed == item.completed &&
		   (p.state & BTRFS_BALANCE_STATE_RUNNING) &&
		   (p.flags & ~(__u64)BTRFS_BALANCE_RESUME) == ALL_TYPES,
		   "progress says the same: completed %llu, state 0x%llx, flags 0x%llx%s",
		   (unsigned long long)p.stat.completed,
		   (unsigned long long)p.state, (unsigned long long)p.flags,
		   err(ret));

	for (below = 0, i = 0; i < mnt_chunks.n; i++) {
		if (mnt_chunks.c[i].start >= st.bound)
			continue;
		if (chunk_moved(&mnt_chunks, i, &st.chunks)) {
			ksft_print_msg("not in the state file: %s\n",
				       chunk_desc(&mnt_chunks.c[i], desc,
						  sizeof(desc)));
			below++;
		}
	}
	tap_result(!below, "below the bound only chunks the balance started with (%d others)",
		   below);

	ret = verify_files(env->mnt, st.nfiles, st.file_size, why, sizeof(why));
	tap_result(!ret, "every file verifies after the crash%s%s",
		   ret ? ": " : "", ret ? why : "");

	/* The resume, to its end. */
	ret = balance_hold_set(0);
	if (!ret)
		ret = wait_balance_gone(fd, HANG_MS);
	tap_result(!ret && kmsg_contains(&k, "balance: ended with status: 0\n") == 1,
		   "the resumed balance ends with status 0%s", err(ret));
	if (ret)
		goto fatal;

	n = kmsg_relocations(&k, relocs, MAX_CHUNKS);
	if (n < 0) {
		tap_result(false, "the kernel log: %s", strerror(-n));
		goto fatal;
	}
	/* Each chunk left at the crash, relocated exactly once. */
	memset(times, 0, sizeof(times));
	for (other = 0, i = 0; i < n; i++) {
		j = find_chunk(&mnt_chunks, relocs[i]);
		if (j < 0 || mnt_chunks.c[j].start >= st.bound ||
		    chunk_moved(&mnt_chunks, j, &st.chunks)) {
			ksft_print_msg("relocated, not a chunk the balance started with: %llu%s\n",
				       (unsigned long long)relocs[i],
				       relocs[i] >= st.bound ? " (at or above the bound)" : "");
			other++;
			continue;
		}
		times[j]++;
	}
	for (left = 0, twice = 0, missing = 0, i = 0; i < mnt_chunks.n; i++) {
		if (mnt_chunks.c[i].start >= st.bound)
			continue;
		left++;
		if (times[i] == 1)
			continue;
		ksft_print_msg("%s relocated %d times\n",
			       chunk_desc(&mnt_chunks.c[i], desc, sizeof(desc)),
			       times[i]);
		if (times[i])
			twice++;
		else
			missing++;
	}
	ksft_print_msg("N=%d chunks: %d relocated before the crash (committed), %d needed after it, %d relocations logged by the resume\n",
		       st.chunks.n, gone, left, n);
	tap_result(!twice && !missing,
		   "each of the %d chunks left at the crash relocated exactly once (%d twice or more, %d never)",
		   left, twice, missing);
	tap_result(!other && n == left,
		   "nothing else relocated: %d relocations for %d chunks, %d of copies or unknown chunks",
		   n, left, other);

	ret = read_chunks(fd, &after);
	for (below = 0, i = 0; !ret && i < after.n; i++) {
		if (after.c[i].start < st.bound) {
			ksft_print_msg("left below the bound: %s\n",
				       chunk_desc(&after.c[i], desc, sizeof(desc)));
			below++;
		}
	}
	i = ret ? ret : balance_item_present(fd);
	tap_result(!ret && !below && i == 0,
		   "no chunk below the bound is left (%d), nor the balance item (%d)",
		   below, i);

	ret = verify_files(env->mnt, st.nfiles, st.file_size, why, sizeof(why));
	tap_result(!ret, "every file verifies after the resume%s%s",
		   ret ? ": " : "", ret ? why : "");

	kmsg_line(&k, "balance: resume", line, sizeof(line));
	ret = strcmp(line, RESUME_LINE);
	tap_result(!ret, "the resume keeps the original filters: \"%s\"%s%s%s",
		   line, ret ? " (want \"" : "", ret ? RESUME_LINE : "",
		   ret ? "\")" : "");

	ret = scrub_fs(env->mnt);
	tap_result(!ret, "btrfs scrub start -Bd: no error, corrected or not (%d)",
		   ret);
	close(fd);
	fd = -1;
	ret = umount_fs(env->mnt);
	mounted = ret != 0;
	tap_result(!ret, "umount%s", err(ret));
	if (ret)
		goto fatal;
	tap_result(!check_fs_with(env, NDEVS, true),
		   "btrfs check --readonly --check-data-csum");
	kmsg_end(&k);
	ksft_finished();

fatal:
	balance_hold_set(0);
	if (fd >= 0)
		close(fd);
	if (mounted)
		umount_fs(env->mnt);
	kmsg_end(&k);
	tap_skip_rest(T_NR, "an earlier step failed");
	ksft_finished();
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	struct test_env env;
	int phase = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1) {
		if (!strcmp(argv[1], "1") || !strcmp(argv[1], "interrupt"))
			phase = 1;
		else if (!strcmp(argv[1], "2") || !strcmp(argv[1], "verify"))
			phase = 2;
		else {
			fprintf(stderr, "usage: %s [1|interrupt|2|verify]\n",
				argv[0]);
			return KSFT_FAIL;
		}
	} else {
		phase = kernel_cmdline_num("crash_phase", 0);
	}
	if (phase != 1 && phase != 2)
		ksft_exit_skip("no phase: pass 1 or 2, or restriper.crash_phase=1|2 on the kernel command line\n");
	if (env_load(&env) < NDEVS) {
		if (phase == 1)
			return phase1_failed("BTRFS_TEST_DEVS names %d devices, %d needed",
					     env.ndevs, NDEVS);
		ksft_exit_fail_msg("BTRFS_TEST_DEVS names %d devices, %d needed\n",
				   env.ndevs, NDEVS);
	}
	return phase == 1 ? phase_interrupt(&env) : phase_verify(&env);
}
