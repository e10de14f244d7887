// SPDX-License-Identifier: GPL-2.0
/*
 * Power cuts during a balance: the guest side of run_powercut.sh.
 *
 * A run is two or three boots of one machine on the same disks; all but the
 * last are cut off by killing QEMU (no unmount, no sync) at a moment the host
 * picks from a seed.  The phase, and what it needs, come from the kernel
 * command line:
 *
 *   restriper.powercut=start   mkfs on the first 3 devices (data single,
 *                              metadata dup), NFILES files of known
 *                              content, a state file (committed) with the
 *                              chunks and the bound; then a writer thread
 *                              appends records to "journal", each made
 *                              durable by fdatasync() and announced on the
 *                              console as "# synced N" (N records durable);
 *                              then the balance:
 *     restriper.powercut_mode=convert   data single -> raid1, metadata and
 *                                       system dup -> raid1
 *     restriper.powercut_mode=full      every chunk, no filter
 *     restriper.powercut_pause=K        (optional) pause once K chunks are
 *                                       relocated and print "=== PAUSED ==="
 *                              It prints "=== BALANCE START ===" just before
 *                              the ioctl, and waits to be killed.
 *   restriper.powercut=resume  mounts (the kernel resumes the balance),
 *                              prints "=== MOUNTED ===", waits for the end
 *                              and to be killed.
 *   restriper.powercut=verify  TAP: mounts read-only and checks the item's
 *                              counts against the chunks gone, as the cut
 *                              left them; remounts read-write (the kernel
 *                              resumes the balance), lets it finish (starts
 *                              it again with the same arguments when the cut
 *                              came before its item was committed), then
 *                              checks: no chunk the balance started with is
 *                              left, every chunk has the target profile,
 *                              every file and the journal up to
 *     restriper.powercut_synced=N       (the host's count of "# synced"
 *                                       records) verify, no balance item is
 *                              left, "btrfs scrub start -Bd", umount,
 *                              "btrfs check --readonly --check-data-csum".
 *
 * Lines for the host: "# powercut: bound B" (the first boot; the verify
 * boot prints it again when it had to start the balance anew, with its new
 * bound).  The host checks the "relocating block group" lines of every boot
 * against it (no chunk relocated twice, no copy relocated).
 *
 * Without a phase it skips (exit status 4).  Environment as the other
 * kselftests: BTRFS_TEST_DEVS (at least 3), BTRFS_TEST_MNT.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>

#include "btrfs_util.h"
#include "kselftest.h"

#define NDEVS		3
#define DEV_SIZE	"512M"
#define NFILES		12
#define FILE_SIZE	(8 * SZ_1M)
#define REC_SIZE	(64 * 1024)
#define MAX_RECS	256	/* 16 MiB of journal at most */
#define JOURNAL_IDX	99	/* the pattern of the journal's records */
#define MOUNT_OPTS	"nodiscard,nossd"
#define STATE_NAME	"powercut.state"
#define STATE_MAGIC	"powercut_test state 1"
#define ALL_TYPES	(BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA | \
			 BTRFS_BALANCE_SYSTEM)
/* Waits that end on an event: only a hang reaches these. */
#define HANG_MS		(300 * 1000)

enum mode { MODE_FULL, MODE_CONVERT };

struct state {
	enum mode mode;
	__u64 bound;
	struct chunk_list chunks;	/* at the start of the balance */
};

/* ---- helpers ---- */

static int open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	return fd < 0 ? -errno : fd;
}

static void balance_args(enum mode mode, struct btrfs_ioctl_balance_args *a)
{
	memset(a, 0, sizeof(*a));
	a->flags = ALL_TYPES;
	if (mode != MODE_CONVERT)
		return;
	a->data.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a->data.target = BTRFS_BLOCK_GROUP_RAID1;
	a->meta.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a->meta.target = BTRFS_BLOCK_GROUP_RAID1;
	a->sys = a->meta;
}

/* The profile every chunk of @type must have once the balance is done. */
static __u64 target_profile(enum mode mode, __u64 type)
{
	if (mode == MODE_CONVERT)
		return BTRFS_BLOCK_GROUP_RAID1;
	/* as mkfs made them: -d single -m dup */
	return type & BTRFS_BLOCK_GROUP_DATA ? BTRFS_AVAIL_ALLOC_BIT_SINGLE :
	       BTRFS_BLOCK_GROUP_DUP;
}

static int state_write(const char *mnt, const struct state *st)
{
	char path[PATH_SIZE];
	FILE *f;
	int i, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", mnt, STATE_NAME);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\nmode %d\nbound %llu\nchunks %d\n", STATE_MAGIC,
		st->mode, (unsigned long long)st->bound, st->chunks.n);
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
	char path[PATH_SIZE], line[256];
	int n = -1, mode = -1, ret = -EINVAL;
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
		if (sscanf(line, "mode %d", &mode) == 1) {
			continue;
		} else if (sscanf(line, "bound %llu", &a) == 1) {
			st->bound = a;
		} else if (sscanf(line, "chunks %d", &n) == 1) {
			if (n < 1 || n > MAX_CHUNKS)
				goto out;
		} else if (sscanf(line, "chunk %llu %llu %llu", &a, &b, &c) == 3) {
			if (st->chunks.n >= MAX_CHUNKS)
				goto out;
			st->chunks.c[st->chunks.n].start = a;
			st->chunks.c[st->chunks.n].length = b;
			st->chunks.c[st->chunks.n].type = c;
			st->chunks.n++;
		} else if (!strcmp(line, "end\n")) {
			ret = 0;
			break;
		} else {
			goto out;
		}
	}
	if (!ret && (st->chunks.n != n || !st->bound ||
		     (mode != MODE_FULL && mode != MODE_CONVERT)))
		ret = -EINVAL;
	st->mode = mode;
out:
	fclose(f);
	return ret;
}

/* ---- the writer: journal records made durable one by one ---- */

struct writer {
	pthread_t thread;
	const char *mnt;
	int ret;
};

static void *writer_fn(void *arg)
{
	struct writer *w = arg;
	char path[PATH_SIZE];
	__u64 *buf;
	int fd, seq;

	snprintf(path, sizeof(path), "%s/journal", w->mnt);
	buf = malloc(REC_SIZE);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!buf || fd < 0) {
		w->ret = -ENOMEM;
		free(buf);
		return NULL;
	}
	for (seq = 0; seq < MAX_RECS; seq++) {
		fill_pattern(buf, REC_SIZE, JOURNAL_IDX, (__u64)seq * REC_SIZE);
		if (pwrite(fd, buf, REC_SIZE, (off_t)seq * REC_SIZE) != REC_SIZE ||
		    fdatasync(fd)) {
			w->ret = errno ? -errno : -EIO;
			printf("# writer: record %d: %s\n", seq, strerror(-w->ret));
			break;
		}
		printf("# synced %d\n", seq + 1);
		usleep(20 * 1000);
	}
	close(fd);
	free(buf);
	return NULL;
}

/* Records 0 to @synced - 1 must be there; the rest may be or not. */
static int verify_journal(const char *mnt, long synced, char *why, size_t size)
{
	char path[PATH_SIZE];
	__u64 *buf, *want;
	struct stat st;
	int fd, ret = 0;
	long seq;

	snprintf(path, sizeof(path), "%s/journal", mnt);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		snprintf(why, size, "open journal: %s", strerror(errno));
		return synced ? -errno : 0;
	}
	buf = malloc(REC_SIZE);
	want = malloc(REC_SIZE);
	if (!buf || !want || fstat(fd, &st)) {
		ret = -ENOMEM;
		goto out;
	}
	if (st.st_size < synced * REC_SIZE) {
		snprintf(why, size, "journal of %lld bytes, %ld records synced",
			 (long long)st.st_size, synced);
		ret = -EFBIG;
		goto out;
	}
	for (seq = 0; seq < synced; seq++) {
		fill_pattern(want, REC_SIZE, JOURNAL_IDX, (__u64)seq * REC_SIZE);
		if (pread(fd, buf, REC_SIZE, seq * REC_SIZE) != REC_SIZE ||
		    memcmp(buf, want, REC_SIZE)) {
			snprintf(why, size, "journal record %ld differs", seq);
			ret = -EILSEQ;
			break;
		}
	}
	if (!ret)
		snprintf(why, size, "%ld records synced, %lld bytes in the file",
			 synced, (long long)st.st_size);
out:
	free(buf);
	free(want);
	close(fd);
	return ret;
}

static void marker(const char *text)
{
	char line[128];
	int len;

	/* On a line of its own, in one write. */
	fflush(stdout);
	len = snprintf(line, sizeof(line), "\n%s\n", text);
	if (write(STDOUT_FILENO, line, len) != len)
		return;
}

static void __attribute__((noreturn)) wait_for_the_cut(void)
{
	marker("=== WAITING FOR THE CUT ===");
	for (;;)
		pause();
}

static int failed(const char *fmt, ...)
{
	va_list ap;

	printf("# powercut_test: FAILED: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return KSFT_FAIL;
}

/* ---- phase start ---- */

static int phase_start(struct test_env *env)
{
	char *mkfs[11 + NDEVS] = {
		"mkfs.btrfs", "-f", "-q", "-K", "-d", "single", "-m", "dup",
		"-b", DEV_SIZE,
	};
	struct btrfs_ioctl_balance_args args, p;
	struct balance_item_state item;
	struct balance_thread bt = { 0 };
	struct writer w = { .mnt = env->mnt };
	struct state st = { 0 };
	char mode[16] = "";
	long pause_at;
	__u64 end;
	int fd, i, ret;

	kernel_cmdline_get("powercut_mode", mode, sizeof(mode));
	if (!strcmp(mode, "convert"))
		st.mode = MODE_CONVERT;
	else if (!strcmp(mode, "full"))
		st.mode = MODE_FULL;
	else
		return failed("restriper.powercut_mode: convert or full, not \"%s\"", mode);
	pause_at = kernel_cmdline_num("powercut_pause", 0);

	for (i = 0; i < NDEVS; i++)
		mkfs[10 + i] = env->devs[i];
	mkfs[10 + NDEVS] = NULL;
	mkdir(env->mnt, 0755);
	if (run_cmd(mkfs))
		return failed("mkfs.btrfs");
	ret = mount_fs(env, NDEVS, 0, MOUNT_OPTS);
	if (ret)
		return failed("mount: %s", strerror(-ret));
	fd = open_dir(env->mnt);
	if (fd < 0)
		return failed("open %s: %s", env->mnt, strerror(-fd));
	for (i = 0; i < NFILES; i++) {
		ret = write_pattern_file(env->mnt, i, FILE_SIZE);
		if (ret)
			return failed("write f%02d: %s", i, strerror(-ret));
	}
	if (syncfs(fd))
		return failed("syncfs: %s", strerror(errno));
	ret = read_chunks(fd, &st.chunks);
	if (ret)
		return failed("read the chunk tree: %s", strerror(-ret));
	st.bound = chunks_end(&st.chunks);
	ret = state_write(env->mnt, &st);
	if (!ret && syncfs(fd))
		ret = -errno;
	if (ret)
		return failed("write the state file: %s", strerror(-ret));
	printf("# powercut: mode %s, %d chunks, %d files of %llu bytes, pause at %ld\n",
	       mode, st.chunks.n, NFILES, (unsigned long long)FILE_SIZE, pause_at);
	printf("# powercut: bound %llu\n", (unsigned long long)st.bound);

	if (pthread_create(&w.thread, NULL, writer_fn, &w))
		return failed("pthread_create");
	balance_args(st.mode, &args);
	marker("=== BALANCE START ===");
	ret = balance_thread_start(&bt, fd, &args);
	if (ret)
		return failed("start the balance: %s", strerror(-ret));
	/* The writer may have moved the end of the chunks meanwhile. */
	for (end = now_ms() + HANG_MS; now_ms() < end; usleep(5 * 1000)) {
		if (!balance_item_read(fd, &item)) {
			printf("# powercut: bound %llu (the balance item's)\n",
			       (unsigned long long)item.bound);
			break;
		}
		if (balance_thread_done(&bt))
			break;
	}
	if (pause_at > 0) {
		end = now_ms() + HANG_MS;
		for (;;) {
			if (balance_thread_done(&bt))
				break;
			ret = balance_progress(fd, &p);
			if (!ret && p.stat.completed >= (__u64)pause_at)
				break;
			if (now_ms() > end)
				return failed("no progress to %ld chunks", pause_at);
			usleep(5 * 1000);
		}
		ret = balance_ctl(fd, BTRFS_BALANCE_CTL_PAUSE);
		printf("# powercut: pause: %s\n", ret ? strerror(-ret) : "ok");
		if (!ret)
			marker("=== PAUSED ===");
	}
	ret = balance_thread_join(&bt);
	printf("# powercut: the balance returned %d (%s)\n", ret,
	       ret < 0 ? strerror(-ret) : "-");
	wait_for_the_cut();
}

/* ---- phase resume ---- */

static int phase_resume(struct test_env *env)
{
	int fd, ret;

	ret = mount_fs(env, NDEVS, 0, MOUNT_OPTS);
	if (ret)
		return failed("mount: %s", strerror(-ret));
	marker("=== MOUNTED ===");
	fd = open_dir(env->mnt);
	if (fd < 0)
		return failed("open %s: %s", env->mnt, strerror(-fd));
	ret = wait_balance_gone(fd, HANG_MS);
	printf("# powercut: the resume %s\n", ret ? strerror(-ret) : "ended");
	wait_for_the_cut();
}

/* ---- phase verify ---- */

enum {
	T_MOUNT,
	T_STATE,
	T_ITEM,
	T_FINISHED,
	T_NONE_LEFT,
	T_PROFILES,
	T_FILES,
	T_JOURNAL,
	T_NO_ITEM,
	T_SCRUB,
	T_UMOUNT,
	T_CHECK,
	T_NR,
};

/*
 * The item the cut left (if any) counts exactly the chunks of the start
 * that are gone: a relocation is counted in the transaction that removes
 * its chunk.  0, or -EILSEQ (or -errno); what was seen in @how.
 */
static int check_item(int fd, const struct state *st, char *how, size_t size)
{
	struct balance_item_state item;
	struct chunk_list now;
	int i, gone = 0, ret;

	ret = balance_item_present(fd);
	if (ret <= 0) {
		snprintf(how, size, "no item (%d): cut before it was committed, or after the end",
			 ret);
		return ret;
	}
	ret = balance_item_read(fd, &item);
	if (!ret)
		ret = read_chunks(fd, &now);
	if (ret) {
		snprintf(how, size, "%s", strerror(-ret));
		return ret;
	}
	printf("# powercut: bound %llu (the balance item's)\n",
	       (unsigned long long)item.bound);
	for (i = 0; i < st->chunks.n; i++)
		gone += chunk_moved(&st->chunks, i, &now);
	snprintf(how, size, "completed %llu, chunks of the state file gone %d of %d, bound %llu (state file %llu)",
		 (unsigned long long)item.completed, gone, st->chunks.n,
		 (unsigned long long)item.bound, (unsigned long long)st->bound);
	if (item.bound < st->bound)
		return -EILSEQ;
	/*
	 * Exact for a full balance that started where the state file was
	 * written.  The writer may have allocated chunks between the two,
	 * and a convert also takes the chunks allocated while it started,
	 * above the bound (patch 32): those are its work too, unknown here.
	 */
	if (st->mode == MODE_FULL && item.bound == st->bound ?
	    item.completed != (__u64)gone : item.completed < (__u64)gone)
		return -EILSEQ;
	return 0;
}

/*
 * Let the balance finish: the one the mount resumed, or, when no item was
 * committed before the cut and chunks the balance started with are left,
 * the same balance started anew.  0 or -errno, and what happened in @how.
 */
static int finish_balance(int fd, const struct state *st, struct kmsg *k,
			  char *how, size_t size)
{
	struct btrfs_ioctl_balance_args args;
	struct chunk_list now;
	int i, left = 0, ret;

	/* The mount resumes a balance whose item it finds. */
	ret = wait_balance_gone(fd, HANG_MS);
	if (ret)
		return ret;
	if (kmsg_contains(k, "balance: resume") == 1) {
		if (kmsg_contains(k, "balance: ended with status: 0\n") != 1) {
			snprintf(how, size, "the resume did not end with status 0");
			return -EIO;
		}
		snprintf(how, size, "resumed at mount, ended with status 0");
		return 0;
	}
	ret = read_chunks(fd, &now);
	if (ret)
		return ret;
	for (i = 0; i < now.n; i++)
		left += now.c[i].start < st->bound;
	if (!left) {
		snprintf(how, size, "no balance item: the balance had ended before the cut");
		return 0;
	}
	/* The cut came before the item was committed: start again. */
	printf("# powercut: bound %llu (started anew)\n",
	       (unsigned long long)chunks_end(&now));
	balance_args(st->mode, &args);
	ret = balance_v2(fd, &args);
	snprintf(how, size, "no balance item and %d chunks left: started anew, returned %d",
		 left, ret);
	return ret;
}

static int phase_verify(struct test_env *env)
{
	struct kmsg k = { .fd = -1 };
	struct chunk_list after;
	struct state st;
	char why[256], desc[128];
	int fd = -1, i, ret, left, wrong;
	long synced = kernel_cmdline_num("powercut_synced", 0);
	bool mounted = false;
	__u64 bad;

	ksft_print_header();
	ksft_set_plan(T_NR);
	ksft_print_msg("powercut_test: verify after the power cut(s); %ld journal records synced\n",
		       synced);
	/*
	 * Read-only first: the item and the chunks are checked as the cut
	 * left them, before the remount read-write lets the resume thread and
	 * the cleaner (which removes a block group a pause emptied) change
	 * anything.
	 */
	ret = kmsg_start(&k);
	if (!ret)
		ret = mount_fs(env, NDEVS, MS_RDONLY, MOUNT_OPTS);
	if (!ret) {
		mounted = true;
		fd = open_dir(env->mnt);
		ret = fd < 0 ? fd : 0;
	}
	tap_result(!ret, "mount after the cut (read-only)%s%s",
		   ret ? ": " : "", ret ? strerror(-ret) : "");
	if (ret)
		goto fatal;
	ret = state_read(env->mnt, &st);
	tap_result(!ret, "the state file: mode %s, %d chunks, bound %llu%s%s",
		   st.mode == MODE_CONVERT ? "convert" : "full", st.chunks.n,
		   (unsigned long long)st.bound, ret ? ": " : "",
		   ret ? strerror(-ret) : "");
	if (ret)
		goto fatal;

	ret = check_item(fd, &st, why, sizeof(why));
	tap_result(!ret, "the item counts the relocations that committed: %s", why);
	ret = remount_fs(env->mnt, 0, MOUNT_OPTS);
	if (ret) {
		tap_result(false, "remount read-write: %s", strerror(-ret));
		goto fatal;
	}

	why[0] = '\0';
	ret = finish_balance(fd, &st, &k, why, sizeof(why));
	tap_result(!ret, "the balance finishes: %s%s%s", why, ret ? ": " : "",
		   ret ? strerror(-ret) : "");
	if (ret)
		goto fatal;

	ret = read_chunks(fd, &after);
	if (ret) {
		tap_result(false, "read the chunk tree: %s", strerror(-ret));
		goto fatal;
	}
	for (left = 0, wrong = 0, i = 0; i < after.n; i++) {
		const struct chunk *c = &after.c[i];

		if (find_chunk(&st.chunks, c->start) >= 0) {
			ksft_print_msg("left behind: %s\n",
				       chunk_desc(c, desc, sizeof(desc)));
			left++;
		}
		if (chunk_profile(c->type) != target_profile(st.mode, c->type)) {
			ksft_print_msg("not of the target profile: %s\n",
				       chunk_desc(c, desc, sizeof(desc)));
			wrong++;
		}
	}
	tap_result(!left, "no chunk the balance started with is left (%d of %d)",
		   left, st.chunks.n);
	tap_result(!wrong, "every chunk has the target profile (%d of %d do not)",
		   wrong, after.n);

	ret = drop_page_cache();
	for (i = 0; !ret && i < NFILES; i++) {
		ret = verify_pattern_file(env->mnt, i, FILE_SIZE, &bad);
		if (ret)
			snprintf(why, sizeof(why), "f%02d: %s at %llu", i,
				 strerror(-ret), (unsigned long long)bad);
	}
	tap_result(!ret, "the %d files verify%s%s", NFILES, ret ? ": " : "",
		   ret ? why : "");
	ret = verify_journal(env->mnt, synced, why, sizeof(why));
	tap_result(!ret, "the journal verifies up to its last fdatasync: %s", why);

	ret = balance_item_present(fd);
	tap_result(ret == 0, "no balance item is left (%d)", ret);
	ret = scrub_fs(env->mnt);
	tap_result(!ret, "btrfs scrub start -Bd: no error, corrected or not (%d)",
		   ret);
	close(fd);
	fd = -1;
	ret = umount_fs(env->mnt);
	mounted = ret != 0;
	tap_result(!ret, "umount%s%s", ret ? ": " : "", ret ? strerror(-ret) : "");
	if (ret)
		goto fatal;
	tap_result(!check_fs_with(env, NDEVS, true),
		   "btrfs check --readonly --check-data-csum");
	kmsg_end(&k);
	ksft_finished();

fatal:
	if (fd >= 0)
		close(fd);
	if (mounted)
		umount_fs(env->mnt);
	kmsg_end(&k);
	tap_skip_rest(T_NR, "an earlier step failed");
	ksft_finished();
}

int main(void)
{
	struct test_env env;
	char phase[16] = "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	kernel_cmdline_get("powercut", phase, sizeof(phase));
	if (strcmp(phase, "start") && strcmp(phase, "resume") &&
	    strcmp(phase, "verify"))
		ksft_exit_skip("no phase: restriper.powercut=start|resume|verify on the kernel command line\n");
	if (env_load(&env) < NDEVS)
		return failed("BTRFS_TEST_DEVS names %d devices, %d needed",
			      env.ndevs, NDEVS);
	if (!strcmp(phase, "start"))
		return phase_start(&env);
	if (!strcmp(phase, "resume"))
		return phase_resume(&env);
	return phase_verify(&env);
}
