// SPDX-License-Identifier: GPL-2.0
/*
 * The btrfs balance under concurrency: pause, cancel, resume and progress
 * issued from several threads while a balance runs beside writers and
 * readers; a remount read-only and back during a paused balance; an unmount
 * during a running balance; a device add or remove racing a balance start;
 * converts back and forth while writers make the filesystem allocate data
 * chunks, some of them as a convert starts.
 *
 * Each call's result must be one the documentation lists for its kind in
 * the state the call could have met (docs/reliability.md, "Concurrency",
 * gives the sets and where they come from); each test ends with the
 * filesystem checked by "btrfs check --readonly" in its teardown, and the
 * VM stage fails on any kernel splat.
 *
 * Environment: BTRFS_TEST_DEVS, the block devices to use, space separated
 * (at least 3 of them, each used by nothing else; they are reformatted);
 * BTRFS_TEST_MNT, an empty directory to mount on (default /mnt/test).
 * mkfs.btrfs and btrfs must be in PATH.  Run as root, on a kernel with
 * CONFIG_BTRFS_DEBUG (the balance hold points).
 *
 * Nothing here waits for time to pass: a race that must be met is opened
 * with the hold points (/sys/fs/btrfs/<fsid>/debug/balance_hold), a userfaultfd
 * page or a barrier, and every wait ends on an event, with a timeout that
 * only a hang reaches.  Where the interleaving is left to the scheduler
 * (the random phase of the first test, the barrier races of the device
 * tests, the start of the converts under writers), every outcome the
 * documentation allows is accepted and checked for what it implies; which
 * ones were met is logged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>

#include "btrfs_util.h"

/* The harness has an unused parameter; -Wextra is meant for this file. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* Each TEST_F wrapper of the harness keeps a local across its setjmp. */
#pragma GCC diagnostic ignored "-Wclobbered"

#define RAID1		BTRFS_BLOCK_GROUP_RAID1
#define EXCL_BUSY	BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS
#define FULL		(BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA | \
			 BTRFS_BALANCE_SYSTEM)
#define ST_RUNNING	BTRFS_BALANCE_STATE_RUNNING
#define ST_PAUSE_REQ	BTRFS_BALANCE_STATE_PAUSE_REQ
#define ST_CANCEL_REQ	BTRFS_BALANCE_STATE_CANCEL_REQ
#define ST_ALL		(ST_RUNNING | ST_PAUSE_REQ | ST_CANCEL_REQ)
/*
 * The flags of every mount: noatime, for a reader's atime update would
 * make a remount read-only fail with -EBUSY.
 */
#define MNT_FLAGS	MS_NOATIME
#define MAX_JOBS	8
/* Waits that end on an event: only a hang reaches these. */
#define HANG_MS		(100 * 1000)

/* ---- Jobs: a blocking call in a thread of its own ---- */

struct job {
	pthread_t tid;
	bool used;		/* the slot is taken, from job_new() to job_join() */
	bool started;
	pid_t task;		/* for /proc/self/task/<task>/stack */
	int (*fn)(struct job *j);
	int fd;
	long arg;
	const char *path;
	void *ptr;
	pthread_barrier_t *barrier;	/* waited at before the call, if set */
	struct btrfs_ioctl_balance_args args;
	int count;		/* calls made, for the ones that repeat */
	int ret;
	bool done;
};

/* ---- The load: writers and readers beside the balance ---- */

#define MAX_WRITERS	2
#define MAX_READERS	2
#define WRITER_KEEP	6	/* files a writer keeps; older ones are deleted */
#define WRITER_FILES	999	/* a writer stops after this many */

struct load;

struct load_thread {
	struct load *l;
	int id;
	pthread_t tid;
	bool started;
};

/*
 * Writer k writes w<k>/f<idx> for n = 0, 1, ..., each fsynced before it
 * counts: the files [low, done) are on disk and must read back; the ones
 * below low are deleted.  Readers read random files of both kinds, and
 * the setup's files, from disk (their cached pages dropped first).
 */
struct load {
	char mnt[PATH_MAX - 64];
	int nbase;
	int nwriters;
	int nreaders;
	struct load_thread th[MAX_WRITERS + MAX_READERS];
	bool stop;
	unsigned int low[MAX_WRITERS];
	unsigned int done[MAX_WRITERS];
	unsigned long reads;
	pthread_mutex_t lock;
	int errors;
	char error[256];
};

/* ---- A world: a fresh filesystem for each test (btrfs_world.h) ---- */

#include "btrfs_world.h"

/* A test: its filesystem (btrfs_world.h), its jobs and its load. */
struct world {
	struct fs_world fs;
	struct job jobs[MAX_JOBS];
	struct job *bal;	/* the balance started by the test */
	struct load load;
};


/* ---- Jobs: their threads and calls ---- */

static void *job_thread(void *p)
{
	struct job *j = p;

	__atomic_store_n(&j->task, (pid_t)syscall(SYS_gettid),
			 __ATOMIC_RELEASE);
	if (j->barrier)
		pthread_barrier_wait(j->barrier);
	j->ret = j->fn(j);
	__atomic_store_n(&j->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static bool job_done(struct job *j)
{
	return __atomic_load_n(&j->done, __ATOMIC_ACQUIRE);
}

/* Wait for @j and free its slot; its results stay until job_new(). */
static int job_join(struct job *j)
{
	if (j->started) {
		pthread_join(j->tid, NULL);
		j->started = false;
	}
	j->used = false;
	return j->ret;
}

static int do_balance(struct job *j)
{
	return balance_v2(j->fd, &j->args);
}

/* The args on a page of the test's (a userfaultfd page). */
static int do_balance_at(struct job *j)
{
	return balance_v2(j->fd, j->ptr);
}

static int do_ctl(struct job *j)
{
	return balance_ctl(j->fd, (int)j->arg);
}

static int do_umount(struct job *j)
{
	return umount2(j->path, 0) ? -errno : 0;
}

/* With MNT_FLAGS, as every mount of the world. */
static int remount(const char *mnt, unsigned long flags, const char *data)
{
	return remount_fs(mnt, MNT_FLAGS | flags, data);
}

static int remove_device(int fd, const char *path)
{
	struct btrfs_ioctl_vol_args_v2 va;

	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "%s", path);
	return xioctl(fd, BTRFS_IOC_RM_DEV_V2, &va);
}

static int do_add(struct job *j)
{
	if (j->ptr)	/* arguments on a page the test controls */
		return xioctl(j->fd, BTRFS_IOC_ADD_DEV, j->ptr);
	return add_device(j->fd, j->path);
}

static int do_remove(struct job *j)
{
	struct btrfs_ioctl_vol_args_v2 va;

	if (j->path)
		return remove_device(j->fd, j->path);
	memset(&va, 0, sizeof(va));
	va.flags = BTRFS_DEVICE_SPEC_BY_ID;
	va.devid = j->arg;
	return xioctl(j->fd, BTRFS_IOC_RM_DEV_V2, &va);
}

/* The devid of the device at @path in the filesystem, or -ENOENT. */
static long devid_of(int fd, const char *path)
{
	struct btrfs_ioctl_dev_info_args di;
	__u64 devid;

	for (devid = 1; devid <= 16; devid++) {
		memset(&di, 0, sizeof(di));
		di.devid = devid;
		if (!ioctl(fd, BTRFS_IOC_DEV_INFO, &di) &&
		    !strcmp((const char *)di.path, path))
			return (long)devid;
	}
	return -ENOENT;
}

/*
 * Resume again and again while the mount is read-only: the result of the
 * first call that does not get -EROFS; ->count is how many did.  Gives up
 * (-ETIMEDOUT) after HANG_MS.
 */
static int do_resume_until_writable(struct job *j)
{
	__u64 end = now_ms() + HANG_MS;
	int ret;

	for (;;) {
		ret = resume(j->fd, &j->args);
		if (ret != -EROFS)
			return ret;
		__atomic_add_fetch(&j->count, 1, __ATOMIC_RELAXED);
		if (now_ms() > end)
			return -ETIMEDOUT;
		usleep(500);
	}
}

/* ---- Writers and readers ---- */

static int writer_idx(int k, unsigned int n)
{
	return 1000 * (k + 1) + (int)n;
}

static __u64 writer_size(unsigned int n)
{
	return (128 << 10) * (1 + n % 4);
}

static void writer_dir(const struct load *l, int k, char *buf, size_t size)
{
	snprintf(buf, size, "%s/w%d", l->mnt, k);
}

static void load_error(struct load *l, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&l->lock);
	if (!l->errors++) {
		va_start(ap, fmt);
		vsnprintf(l->error, sizeof(l->error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&l->lock);
}

/* Write a pattern file and fsync it. */
static int write_synced(const char *dir, int idx, __u64 size)
{
	return write_pattern(dir, idx, size, SZ_1M, PATTERN_FSYNC);
}

/*
 * Read a pattern file from disk: its clean cached pages are dropped first.
 * 0, -errno, or -EILSEQ with *@bad at the first wrong byte.
 */
static int read_back(const char *dir, int idx, __u64 size, __u64 *bad)
{
	return verify_pattern(dir, idx, size, bad, 256 << 10, true);
}

static bool load_stopping(struct load *l)
{
	return __atomic_load_n(&l->stop, __ATOMIC_ACQUIRE);
}

static void *writer_thread(void *p)
{
	struct load_thread *t = p;
	struct load *l = t->l;
	int k = t->id;
	char dir[PATH_MAX], path[PATH_SIZE];
	unsigned int n, low;
	int ret;

	writer_dir(l, k, dir, sizeof(dir));
	for (n = 0; n < WRITER_FILES && !load_stopping(l); n++) {
		ret = write_synced(dir, writer_idx(k, n), writer_size(n));
		if (ret) {
			load_error(l, "writer %d: f%d: %s", k, writer_idx(k, n),
				   strerror(-ret));
			break;
		}
		__atomic_store_n(&l->done[k], n + 1, __ATOMIC_RELEASE);
		low = __atomic_load_n(&l->low[k], __ATOMIC_ACQUIRE);
		if (n + 1 - low > WRITER_KEEP) {
			/* Readers no longer pick it before it goes. */
			__atomic_store_n(&l->low[k], low + 1, __ATOMIC_RELEASE);
			pattern_path(path, dir, writer_idx(k, low));
			if (unlink(path)) {
				load_error(l, "writer %d: unlink %s: %s", k,
					   path, strerror(errno));
				break;
			}
		}
	}
	return NULL;
}

static void *reader_thread(void *p)
{
	struct load_thread *t = p;
	struct load *l = t->l;
	unsigned int seed = 0x5eed + t->id;
	char dir[PATH_MAX];
	unsigned int low, done, n;
	__u64 bad;
	int k, ret;

	while (!load_stopping(l)) {
		k = rand_r(&seed) % (l->nwriters + 1);
		if (k == l->nwriters) {	/* a file of the setup */
			if (!l->nbase)
				continue;
			n = rand_r(&seed) % l->nbase;
			ret = read_back(l->mnt, n, DATA_FILE_SIZE, &bad);
			if (ret) {
				load_error(l, "reader: f%02u: %s at %llu", n,
					   strerror(-ret),
					   (unsigned long long)bad);
				break;
			}
		} else {
			low = __atomic_load_n(&l->low[k], __ATOMIC_ACQUIRE);
			done = __atomic_load_n(&l->done[k], __ATOMIC_ACQUIRE);
			if (done <= low) {
				usleep(1000);
				continue;
			}
			n = low + rand_r(&seed) % (done - low);
			writer_dir(l, k, dir, sizeof(dir));
			ret = read_back(dir, writer_idx(k, n), writer_size(n),
					&bad);
			/* Deleted since it was picked: the writer moved on. */
			if (ret == -ENOENT &&
			    n < __atomic_load_n(&l->low[k], __ATOMIC_ACQUIRE))
				continue;
			if (ret) {
				load_error(l, "reader: w%d/f%d: %s at %llu", k,
					   writer_idx(k, n), strerror(-ret),
					   (unsigned long long)bad);
				break;
			}
		}
		__atomic_add_fetch(&l->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Stop the threads of @l; the number of errors they met. */
static int load_stop(struct load *l)
{
	int i;

	__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
	for (i = 0; i < MAX_WRITERS + MAX_READERS; i++) {
		if (l->th[i].started)
			pthread_join(l->th[i].tid, NULL);
		l->th[i].started = false;
	}
	return l->errors;
}

/* ---- The jobs and the load of the world ---- */

/* A free job slot, zeroed; NULL (and a failure) if there is none. */
static struct job *job_new(struct __test_metadata *_metadata, struct world *w)
{
	int i;

	for (i = 0; i < MAX_JOBS; i++) {
		if (!w->jobs[i].used) {
			memset(&w->jobs[i], 0, sizeof(w->jobs[i]));
			w->jobs[i].used = true;
			w->jobs[i].fd = w->fs.fd;
			return &w->jobs[i];
		}
	}
	EXPECT_TRUE(false) TH_LOG("more than %d jobs at once", MAX_JOBS);
	return NULL;
}

/* Start @j; unless it waits at a barrier, wait until its thread runs. */
static void job_run(struct __test_metadata *_metadata, struct job *j)
{
	__u64 end = now_ms() + HANG_MS;

	ASSERT_NE(NULL, j);
	ASSERT_EQ(0, pthread_create(&j->tid, NULL, job_thread, j));
	j->started = true;
	while (!__atomic_load_n(&j->task, __ATOMIC_ACQUIRE) &&
	       now_ms() < end)
		usleep(1000);
}

static struct job *balance_start(struct __test_metadata *_metadata,
				 struct world *w,
				 const struct btrfs_ioctl_balance_args *a)
{
	struct job *j = job_new(_metadata, w);

	if (!j)
		return NULL;
	j->fn = do_balance;
	j->args = *a;
	job_run(_metadata, j);
	return j;
}

static struct job *ctl_start(struct __test_metadata *_metadata,
			     struct world *w, int cmd)
{
	struct job *j = job_new(_metadata, w);

	if (!j)
		return NULL;
	j->fn = do_ctl;
	j->arg = cmd;
	job_run(_metadata, j);
	return j;
}

static void load_start(struct __test_metadata *_metadata, struct world *w,
		       int nwriters, int nreaders)
{
	struct load *l = &w->load;
	char dir[PATH_MAX];
	int i, ret;

	ASSERT_GE(MAX_WRITERS, nwriters);
	ASSERT_GE(MAX_READERS, nreaders);
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	ASSERT_GT(sizeof(l->mnt), strlen(w->fs.env.mnt));
	memcpy(l->mnt, w->fs.env.mnt, strlen(w->fs.env.mnt) + 1);
	l->nbase = w->fs.nfiles;
	l->nwriters = nwriters;
	l->nreaders = nreaders;
	for (i = 0; i < nwriters; i++) {
		writer_dir(l, i, dir, sizeof(dir));
		ASSERT_EQ(0, mkdir(dir, 0755)) TH_LOG("mkdir %s: %s", dir,
						      strerror(errno));
	}
	for (i = 0; i < nwriters + nreaders; i++) {
		struct load_thread *t = &l->th[i];

		t->l = l;
		t->id = i < nwriters ? i : i - nwriters;
		ret = pthread_create(&t->tid, NULL,
				     i < nwriters ? writer_thread : reader_thread,
				     t);
		ASSERT_EQ(0, ret);
		t->started = true;
	}
}

/*
 * Wait until every writer has @files files on disk and the readers have
 * read @reads: the load overlaps what comes next.
 */
static void load_wait(struct __test_metadata *_metadata, struct world *w,
		      unsigned int files, unsigned long reads)
{
	struct load *l = &w->load;
	__u64 end = now_ms() + HANG_MS;
	bool ready;
	int k;

	do {
		ASSERT_EQ(0, l->errors) TH_LOG("load: %s", l->error);
		ASSERT_GT(end, now_ms()) TH_LOG("the load does not progress");
		ready = __atomic_load_n(&l->reads, __ATOMIC_RELAXED) >= reads;
		for (k = 0; k < l->nwriters; k++)
			ready = ready &&
				__atomic_load_n(&l->done[k],
						__ATOMIC_ACQUIRE) >=
				files;
		if (!ready)
			usleep(2000);
	} while (!ready);
}

static void load_finish(struct __test_metadata *_metadata, struct world *w)
{
	struct load *l = &w->load;
	int errors = load_stop(l);

	ASSERT_EQ(0, errors) TH_LOG("load: %d errors, first: %s", errors,
				    l->error);
}

/* Every file of the setup and every file the writers kept reads back. */
static void verify_all(struct __test_metadata *_metadata, struct world *w)
{
	struct load *l = &w->load;
	char dir[PATH_MAX];
	unsigned int n;
	__u64 bad;
	int i, k, ret;

	ASSERT_EQ(0, drop_page_cache());
	for (i = 0; i < w->fs.nfiles; i++) {
		ret = read_back(w->fs.env.mnt, i, DATA_FILE_SIZE, &bad);
		ASSERT_EQ(0, ret) TH_LOG("f%02d: %s at %llu", i, strerror(-ret),
					 (unsigned long long)bad);
	}
	for (k = 0; k < l->nwriters; k++) {
		writer_dir(l, k, dir, sizeof(dir));
		for (n = l->low[k]; n < l->done[k]; n++) {
			ret = read_back(dir, writer_idx(k, n), writer_size(n),
					&bad);
			ASSERT_EQ(0, ret)
				TH_LOG("w%d/f%d: %s at %llu", k,
				       writer_idx(k, n), strerror(-ret),
				       (unsigned long long)bad);
		}
	}
}

static void world_teardown(struct __test_metadata *_metadata, struct world *w)
{
	bool busy;
	int i, n;

	world_teardown_begin(_metadata, &w->fs);
	load_stop(&w->load);
	/* A test that failed while a balance ran: stop it. */
	for (n = 0; n < 600; n++) {
		for (busy = false, i = 0; i < MAX_JOBS; i++)
			busy |= w->jobs[i].started && !job_done(&w->jobs[i]);
		if (!busy)
			break;
		if (w->fs.fd >= 0)
			balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL);
		usleep(100 * 1000);
	}
	for (i = 0; i < MAX_JOBS; i++)
		job_join(&w->jobs[i]);
	world_teardown_end(_metadata, &w->fs);
}

/* ---- Checks ---- */

/* Dev items in the chunk tree, after a commit. */
static int count_dev_items(int fd)
{
	struct btrfs_ioctl_search_key sk;
	int n = 0, ret;

	if (syncfs(fd))
		return -errno;
	search_key_exact(&sk, BTRFS_CHUNK_TREE_OBJECTID,
			 BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 0,
			 (__u64)-1);
	ret = tree_search(fd, &sk, count_items_cb, &n);
	return ret ? ret : n;
}

/* The filesystem has @n devices, in memory and on disk. */
static void expect_devices(struct __test_metadata *_metadata,
			   struct world *w, int n)
{
	EXPECT_EQ(n, fs_num_devices(w->fs.fd));
	EXPECT_EQ(n, count_dev_items(w->fs.fd));
}

static bool mount_read_only(const char *mnt)
{
	struct statvfs sv;

	return !statvfs(mnt, &sv) && (sv.f_flag & ST_RDONLY);
}

/* ---- Holding the balance ---- */

/* Wait until a thread waits at hold point @point; fail if @j ended first. */
static void wait_held(struct __test_metadata *_metadata, struct job *j,
		      unsigned long point)
{
	__u64 end = now_ms() + HANG_MS;
	unsigned long set, held;

	for (;;) {
		ASSERT_EQ(0, balance_hold_get(&set, &held));
		if (held & point)
			return;
		ASSERT_FALSE(j && job_done(j))
			TH_LOG("the call ended (%d) before hold point 0x%lx",
			       j->ret, point);
		ASSERT_GT(end, now_ms()) TH_LOG("never held at 0x%lx", point);
		usleep(1000);
	}
}

/*
 * Start @a, held before chunk @skip + 1 of its relocation pass (after
 * @skip chunks): running, counted, @skip chunks relocated.
 */
static void start_held(struct __test_metadata *_metadata, struct world *w,
		       const struct btrfs_ioctl_balance_args *a,
		       unsigned int skip)
{
	ASSERT_EQ(0, balance_hold_skip_set(skip));
	ASSERT_EQ(0, balance_hold_set(HOLD_RELOCATION));
	w->bal = balance_start(_metadata, w, a);
	wait_held(_metadata, w->bal, HOLD_RELOCATION);
}

/* Pause the held balance: the walk meets the request before going on. */
static void pause_held(struct __test_metadata *_metadata, struct world *w)
{
	struct job *pause = ctl_start(_metadata, w, BTRFS_BALANCE_CTL_PAUSE);

	ASSERT_EQ(0, wait_balance_state(w->fs.fd, ST_PAUSE_REQ, HANG_MS));
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, job_join(pause));
	ASSERT_EQ(-ECANCELED, job_join(w->bal));
	EXPECT_EQ(0ULL, w->bal->args.state & ST_RUNNING);
}

/* ---- Results and the sets they must be in ---- */

enum op { OP_PROGRESS, OP_PAUSE, OP_CANCEL, OP_RESUME, OP_START, NR_OPS };

static const char * const op_names[NR_OPS] = {
	"progress", "pause", "cancel", "resume", "start",
};

#define MAX_ALLOWED	5

struct allowed {
	int n;
	int ret[MAX_ALLOWED];
};

/*
 * A balance runs, is paused or is not there; no read-only mount, no device
 * operation, no unmount (docs/reliability.md):
 * - progress: 0 while there is a balance (running or paused), -ENOTCONN;
 * - pause: 0 once a running balance stopped (paused, canceled or ended),
 *   -ENOTCONN when none runs;
 * - cancel: 0 once the balance is gone (a paused one is deleted at once),
 *   -ENOTCONN when there is none;
 * - resume: 0 or -ECANCELED when it ran (to its end; paused or canceled
 *   again), -ENOTCONN when nothing is paused, -EINPROGRESS while it runs,
 *   -EINVAL when a pause or cancel request is still pending as it takes
 *   the paused balance (the balance stays paused, or is canceled);
 * - start: 0 or -ECANCELED when it ran, -EINVAL when a pause or cancel
 *   request from before is still pending (this test starts only when no
 *   balance exists, so never -EINPROGRESS).
 */
static const struct allowed racing_allowed[NR_OPS] = {
	[OP_PROGRESS] = { 2, { 0, -ENOTCONN } },
	[OP_PAUSE] = { 2, { 0, -ENOTCONN } },
	[OP_CANCEL] = { 2, { 0, -ENOTCONN } },
	[OP_RESUME] = { 5, { 0, -ECANCELED, -ENOTCONN, -EINPROGRESS, -EINVAL } },
	[OP_START] = { 3, { 0, -ECANCELED, -EINVAL } },
};

#define MAX_BAD		8

/* A result outside its set, or args that do not fit, and how often. */
struct bad {
	enum op op;
	int ret;
	unsigned long count;
	char what[200];
};

struct tally {
	unsigned long hits[NR_OPS][MAX_ALLOWED];
	int bad;		/* results outside their sets, in all */
	int nbad;		/* distinct ones, in bads */
	struct bad bads[MAX_BAD];
};

static void tally_bad(struct tally *t, enum op op, int ret,
		      unsigned long count, const char *what)
{
	int i;

	t->bad += count;
	for (i = 0; i < t->nbad; i++) {
		if (t->bads[i].op == op && t->bads[i].ret == ret) {
			t->bads[i].count += count;
			return;
		}
	}
	if (t->nbad == MAX_BAD)
		return;
	t->bads[t->nbad].op = op;
	t->bads[t->nbad].ret = ret;
	t->bads[t->nbad].count = count;
	snprintf(t->bads[t->nbad].what, sizeof(t->bads[0].what), "%s", what);
	t->nbad++;
}

/*
 * What a balance's args must say when a call copied them out: the full
 * balance of the test, its args untouched, no unknown state bit, running
 * only for progress, and no more chunks completed than expected.
 */
static const char *args_wrong(enum op op,
			      const struct btrfs_ioctl_balance_args *a)
{
	if ((a->flags & ~(__u64)BTRFS_BALANCE_RESUME) != FULL)
		return "flags are not the request's";
	if (op == OP_START && (a->flags & BTRFS_BALANCE_RESUME))
		return "a start returned the resume flag";
	if (op == OP_RESUME && !(a->flags & BTRFS_BALANCE_RESUME))
		return "a resume returned no resume flag";
	if (a->data.flags || a->meta.flags || a->sys.flags)
		return "the args were changed";
	if (a->state & ~(__u64)ST_ALL)
		return "unknown state bits";
	if (op != OP_PROGRESS && (a->state & ST_RUNNING))
		return "running after the call returned";
	if (a->stat.completed > a->stat.expected)
		return "more chunks completed than expected";
	return NULL;
}

static bool has_args(enum op op, int ret)
{
	return (op == OP_PROGRESS && ret == 0) ||
	       ((op == OP_RESUME || op == OP_START) &&
		(ret == 0 || ret == -ECANCELED));
}

static void tally_add(struct tally *t, const struct allowed *set, enum op op,
		      int ret, const struct btrfs_ioctl_balance_args *a)
{
	const char *why = NULL;
	char errbuf[64], what[200];
	int i;

	for (i = 0; i < set[op].n && set[op].ret[i] != ret; i++)
		;
	if (i == set[op].n) {
		if (ret == EXCL_BUSY)
			snprintf(errbuf, sizeof(errbuf),
				 "returned %d (BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS)",
				 ret);
		else
			snprintf(errbuf, sizeof(errbuf), "returned %d (%s)",
				 ret, ret < 0 ? strerror(-ret) : "positive");
		why = errbuf;
	} else {
		t->hits[op][i]++;
		if (has_args(op, ret))
			why = args_wrong(op, a);
	}
	if (!why)
		return;
	snprintf(what, sizeof(what),
		 "%s %s (args: flags 0x%llx state 0x%llx expected %llu completed %llu)",
		 op_names[op], why, (unsigned long long)a->flags,
		 (unsigned long long)a->state,
		 (unsigned long long)a->stat.expected,
		 (unsigned long long)a->stat.completed);
	tally_bad(t, op, ret, 1, what);
}

static void tally_merge(struct tally *into, const struct tally *t)
{
	int op, i;

	for (op = 0; op < NR_OPS; op++)
		for (i = 0; i < MAX_ALLOWED; i++)
			into->hits[op][i] += t->hits[op][i];
	for (i = 0; i < t->nbad; i++)
		tally_bad(into, t->bads[i].op, t->bads[i].ret, t->bads[i].count,
			  t->bads[i].what);
}

static void tally_log(struct __test_metadata *_metadata,
		      const struct tally *t, const struct allowed *set)
{
	char line[256];
	size_t len;
	int op, i;

	for (op = 0; op < NR_OPS; op++) {
		len = snprintf(line, sizeof(line), "%-8s", op_names[op]);
		for (i = 0; i < set[op].n && len < sizeof(line); i++)
			len += snprintf(line + len, sizeof(line) - len,
					" %d: %lu", set[op].ret[i],
					t->hits[op][i]);
		TH_LOG("%s", line);
	}
	for (i = 0; i < t->nbad; i++)
		TH_LOG("outside its set, %lu times: %s", t->bads[i].count,
		       t->bads[i].what);
}

static int call_op(int fd, enum op op, struct btrfs_ioctl_balance_args *a)
{
	memset(a, 0, sizeof(*a));
	switch (op) {
	case OP_PROGRESS:
		return balance_progress(fd, a);
	case OP_PAUSE:
		return balance_ctl(fd, BTRFS_BALANCE_CTL_PAUSE);
	case OP_CANCEL:
		return balance_ctl(fd, BTRFS_BALANCE_CTL_CANCEL);
	case OP_RESUME:
		return resume(fd, a);
	case OP_START:
	case NR_OPS:
		break;
	}
	full_request(a);
	return balance_v2(fd, a);
}

/* ---- Controllers: threads that pause, cancel, resume and ask progress ---- */

#define NCONTROLLERS	4
#define CONTROLLER_OPS	30

struct controller {
	pthread_t tid;
	bool started;
	pid_t task;
	int fd;
	int id;
	enum op first;		/* its first call, made before the others */
	int first_ret;
	bool first_done;
	struct btrfs_ioctl_balance_args first_args;
	const bool *go;		/* then these, once go is set */
	const bool *stop;
	bool done;
	struct tally tally;
};

/* Random calls, weighted: progress, pause and resume 3, cancel 1. */
static enum op random_op(unsigned int *seed)
{
	static const enum op ops[] = {
		OP_PROGRESS, OP_PROGRESS, OP_PROGRESS, OP_PAUSE, OP_PAUSE,
		OP_PAUSE, OP_RESUME, OP_RESUME, OP_RESUME, OP_CANCEL,
	};

	return ops[rand_r(seed) % ARRAY_SIZE(ops)];
}

static void *controller_thread(void *p)
{
	struct controller *c = p;
	struct btrfs_ioctl_balance_args a;
	unsigned int seed = 0xba1a + c->id;
	enum op op;
	int i, ret;

	__atomic_store_n(&c->task, (pid_t)syscall(SYS_gettid),
			 __ATOMIC_RELEASE);
	c->first_ret = call_op(c->fd, c->first, &c->first_args);
	tally_add(&c->tally, racing_allowed, c->first, c->first_ret,
		  &c->first_args);
	__atomic_store_n(&c->first_done, true, __ATOMIC_RELEASE);

	while (!__atomic_load_n(c->go, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(c->stop, __ATOMIC_ACQUIRE))
		usleep(1000);
	for (i = 0; i < CONTROLLER_OPS; i++) {
		if (__atomic_load_n(c->stop, __ATOMIC_ACQUIRE))
			break;
		op = random_op(&seed);
		ret = call_op(c->fd, op, &a);
		tally_add(&c->tally, racing_allowed, op, ret, &a);
		usleep(rand_r(&seed) % 20000);
	}
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* ---- 1. Racing control calls under writers and readers ---- */

FIXTURE(racing) {
	struct world w;
	struct controller c[NCONTROLLERS];
	bool go;
	bool stop;
};

FIXTURE_SETUP(racing)
{
	if (!world_setup(_metadata, &self->w.fs, 2, 2, "single", "raid1",
			 "384M",
			 MNT_FLAGS))
		return;
	make_data_chunks(_metadata, &self->w.fs, 4);
}

FIXTURE_TEARDOWN(racing)
{
	int i;

	__atomic_store_n(&self->stop, true, __ATOMIC_RELEASE);
	EXPECT_EQ(0, balance_hold_set(0));
	for (i = 0; i < NCONTROLLERS; i++) {
		/* A resume of a controller runs until canceled. */
		while (self->c[i].started &&
		       !__atomic_load_n(&self->c[i].done, __ATOMIC_ACQUIRE) &&
		       self->w.fs.fd >= 0) {
			balance_ctl(self->w.fs.fd, BTRFS_BALANCE_CTL_CANCEL);
			usleep(100 * 1000);
		}
		if (self->c[i].started)
			pthread_join(self->c[i].tid, NULL);
		self->c[i].started = false;
	}
	world_teardown(_metadata, &self->w);
}

static bool controllers_done(FIXTURE_DATA(racing) *self)
{
	int i;

	for (i = 0; i < NCONTROLLERS; i++)
		if (!__atomic_load_n(&self->c[i].done, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

/*
 * Four threads pause, cancel, resume and ask progress at random (fixed
 * seeds) while a full balance runs, is paused, resumed and started again,
 * beside two writers (files written and fsynced, old ones deleted) and two
 * readers (files read back from disk).  First, deterministically: with
 * the balance held running, two pauses wait for it, a progress sees it
 * running and a resume gets -EINPROGRESS; released, it pauses before its
 * first chunk and both pauses return 0.  Then at random, the main thread
 * starting a new balance whenever there is none.  Every result is in the
 * set of its kind, and so are the args it copied out.  At the end: no
 * balance runs; a paused one is canceled; every file reads back, again
 * after a remount.
 */
TEST_F_TIMEOUT(racing, pause_cancel_resume_progress_from_threads_under_io,
	       300)
{
	static const enum op first[NCONTROLLERS] = {
		OP_PAUSE, OP_PAUSE, OP_PROGRESS, OP_RESUME,
	};
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	struct job *starter = NULL;
	struct tally all = { 0 };
	__u64 end;
	int i, ret, starts = 1;

	load_start(_metadata, w, 2, 2);
	load_wait(_metadata, w, 2, 4);
	full_request(&a);
	start_held(_metadata, w, &a, 0);

	for (i = 0; i < NCONTROLLERS; i++) {
		struct controller *c = &self->c[i];

		c->fd = w->fs.fd;
		c->id = i;
		c->first = first[i];
		c->go = &self->go;
		c->stop = &self->stop;
		ASSERT_EQ(0, pthread_create(&c->tid, NULL, controller_thread,
					    c));
		c->started = true;
	}
	/* The pauses wait for the held balance; the others returned. */
	end = now_ms() + HANG_MS;
	for (i = 0; i < NCONTROLLERS; i++) {
		struct controller *c = &self->c[i];

		while (c->first == OP_PAUSE ?
		       !task_waits_in(__atomic_load_n(&c->task,
						      __ATOMIC_ACQUIRE),
				      "btrfs_pause_balance") :
		       !__atomic_load_n(&c->first_done, __ATOMIC_ACQUIRE)) {
			ASSERT_FALSE(c->first == OP_PAUSE &&
				     __atomic_load_n(&c->first_done,
						     __ATOMIC_ACQUIRE))
				TH_LOG("a pause returned (%d) while the balance was held",
				       c->first_ret);
			ASSERT_GT(end, now_ms())
				TH_LOG("controller %d: first call stuck", i);
			usleep(1000);
		}
	}
	EXPECT_EQ(0, self->c[2].first_ret);
	EXPECT_EQ((__u64)ST_RUNNING, self->c[2].first_args.state & ST_RUNNING);
	EXPECT_EQ((__u64)FULL, self->c[2].first_args.flags);
	EXPECT_EQ(-EINPROGRESS, self->c[3].first_ret);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ((__u64)(ST_RUNNING | ST_PAUSE_REQ), p.state);
	expect_exclop(_metadata, &w->fs, "balance");

	/* Released: paused before its first chunk; both pauses return 0. */
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(-ECANCELED, job_join(w->bal));
	EXPECT_EQ(0ULL, w->bal->args.state & ST_RUNNING);
	EXPECT_EQ(0ULL, w->bal->args.stat.completed);
	tally_add(&all, racing_allowed, OP_START, w->bal->ret, &w->bal->args);
	for (i = 0; i < 2; i++) {
		end = now_ms() + HANG_MS;
		while (!__atomic_load_n(&self->c[i].first_done,
					__ATOMIC_ACQUIRE)) {
			ASSERT_GT(end, now_ms()) TH_LOG("pause %d stuck", i);
			usleep(1000);
		}
		EXPECT_EQ(0, self->c[i].first_ret);
	}
	expect_paused(_metadata, &w->fs, FULL, &p);
	EXPECT_EQ(0ULL, p.stat.completed);

	/* At random, a new balance started whenever there is none. */
	__atomic_store_n(&self->go, true, __ATOMIC_RELEASE);
	while (!controllers_done(self)) {
		if (starter && job_done(starter)) {
			job_join(starter);
			tally_add(&all, racing_allowed, OP_START, starter->ret,
				  &starter->args);
			starter = NULL;
		}
		if (!starter && balance_progress(w->fs.fd, &p) == -ENOTCONN) {
			starter = balance_start(_metadata, w, &a);
			starts++;
		}
		usleep(2000);
	}
	if (starter) {
		job_join(starter);
		tally_add(&all, racing_allowed, OP_START, starter->ret,
			  &starter->args);
	}
	for (i = 0; i < NCONTROLLERS; i++) {
		pthread_join(self->c[i].tid, NULL);
		self->c[i].started = false;
		tally_merge(&all, &self->c[i].tally);
	}
	TH_LOG("%d balances started; results (return value: count):", starts);
	tally_log(_metadata, &all, racing_allowed);
	EXPECT_EQ(0, all.bad) TH_LOG("%d results outside their sets", all.bad);

	/* Every thread returned: nothing runs; a paused balance is canceled. */
	ret = balance_progress(w->fs.fd, &p);
	if (ret == 0) {
		EXPECT_EQ(0ULL, p.state);
		EXPECT_EQ(1, balance_item_present(w->fs.fd));
		expect_exclop(_metadata, &w->fs, "balance paused");
		EXPECT_EQ(0, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL));
	} else {
		EXPECT_EQ(-ENOTCONN, ret);
	}
	expect_no_balance(_metadata, &w->fs);

	load_finish(_metadata, w);
	verify_all(_metadata, w);
	world_umount(_metadata, &w->fs);
	world_mount(_metadata, &w->fs, w->fs.ndevs, MNT_FLAGS, NULL);
	expect_no_balance(_metadata, &w->fs);
	verify_all(_metadata, w);
}

/* ---- 1b. A balance call queued behind a resume that finds nothing ---- */

FIXTURE(queued) {
	struct world w;
};

FIXTURE_VARIANT(queued) {
	bool resumes;		/* the queued call resumes, else it starts */
	int want;		/* what it must get */
};

/* Nothing runs or is paused when it gets balance_mutex: it starts. */
FIXTURE_VARIANT_ADD(queued, start) {
	.resumes = false,
	.want = 0,
};

/* Nothing is paused: there is nothing to resume. */
FIXTURE_VARIANT_ADD(queued, resume) {
	.resumes = true,
	.want = -ENOTCONN,
};

FIXTURE_SETUP(queued)
{
	world_setup(_metadata, &self->w.fs, 2, 2, "single", "raid1", "256M",
		    MNT_FLAGS);
}

FIXTURE_TEARDOWN(queued)
{
	world_teardown(_metadata, &self->w);
}

/*
 * A page that anyone, the kernel too, may read, but whose first write
 * waits for the test: it holds @len bytes of @fill.  NULL when skipped.
 */
static void *uffd_wp_page(struct __test_metadata *_metadata, struct world *w,
			  const void *fill, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	struct uffdio_writeprotect wp;
	struct uffdio_register reg;
	struct uffdio_api api;
	void *map;

	w->fs.uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (w->fs.uffd < 0)
		SKIP(return NULL, "userfaultfd: %s", strerror(errno));
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	if (ioctl(w->fs.uffd, UFFDIO_API, &api))
		SKIP(return NULL, "no write-protect userfaultfd: %s",
		     strerror(errno));
	map = mmap(NULL, page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		ASSERT_TRUE(false) TH_LOG("mmap: %s", strerror(errno));
		return NULL;
	}
	memcpy(map, fill, len);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)map;
	reg.range.len = page;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(w->fs.uffd, UFFDIO_REGISTER, &reg))
		SKIP(return NULL, "UFFDIO_REGISTER_MODE_WP: %s",
		     strerror(errno));
	memset(&wp, 0, sizeof(wp));
	wp.range = reg.range;
	wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
	if (ioctl(w->fs.uffd, UFFDIO_WRITEPROTECT, &wp)) {
		ASSERT_TRUE(false) TH_LOG("UFFDIO_WRITEPROTECT: %s",
					  strerror(errno));
		return NULL;
	}
	return map;
}

/*
 * Wait until the thread of @j sleeps in the balance ioctl.  With X holding
 * balance_mutex and no balance, the only place it can sleep there is
 * balance_mutex, in btrfs_try_lock_balance() (inlined: the stack shows the
 * ioctl, and no mutex frame with this kernel's unwinder).
 */
static void wait_for_balance_mutex(struct __test_metadata *_metadata,
				   struct job *j)
{
	__u64 end = now_ms() + HANG_MS;
	char stack[4096];

	for (;;) {
		task_stack(j->task, stack, sizeof(stack));
		if (strstr(stack, "btrfs_ioctl_balance"))
			return;
		ASSERT_FALSE(job_done(j))
			TH_LOG("the call returned (%d) instead of waiting",
			       j->ret);
		ASSERT_GT(end, now_ms())
			TH_LOG("it never waits for balance_mutex; stack:\n%s",
			       stack);
		usleep(1000);
	}
}

/*
 * Three balance ioctls, ordered with a write-protected userfaultfd page:
 * X, a balance that selects nothing, ends and copies its result out to
 * that page, where it waits, holding balance_mutex (nothing runs, nothing
 * is paused, no exclusive operation).  R, a resume, waits for the mutex,
 * and Q, a start or a resume, waits for it after R.  X goes on: R takes
 * the exclusive operation, finds no paused balance, -ENOTCONN, gives the
 * exclusive operation back and unlocks.  Q must then get what its kind
 * gets when nothing runs or is
 * paused: a start runs (0), a resume -ENOTCONN; not the exclusive
 * operation error BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS, which the
 * documentation gives only beside another exclusive operation (and which
 * btrfs-progs reports as success for "balance resume").
 */
TEST_F_TIMEOUT(queued, a_call_behind_a_resume_of_nothing_gets_its_own_result,
	       300)
{
	struct btrfs_ioctl_balance_args noop;
	struct world *w = &self->w;
	struct uffdio_writeprotect wp;
	struct uffd_msg msg;
	struct job *x, *r, *q;
	void *map;

	noop_request(&noop);
	map = uffd_wp_page(_metadata, w, &noop, sizeof(noop));
	if (!map)
		return;

	x = job_new(_metadata, w);
	ASSERT_NE(NULL, x);
	x->fn = do_balance_at;
	x->ptr = map;
	job_run(_metadata, x);
	uffd_wait(_metadata, &w->fs, &msg,
		  "the balance never wrote its result");
	ASSERT_TRUE(!!(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP));
	EXPECT_FALSE(job_done(x));
	/* Its balance is over: no exclusive operation (sysfs needs no mutex). */
	expect_exclop(_metadata, &w->fs, "none");

	r = job_new(_metadata, w);
	ASSERT_NE(NULL, r);
	r->fn = do_balance;
	r->args.flags = BTRFS_BALANCE_RESUME;
	job_run(_metadata, r);
	wait_for_balance_mutex(_metadata, r);
	/* It takes the exclusive operation only once it has the mutex. */
	expect_exclop(_metadata, &w->fs, "none");

	q = job_new(_metadata, w);
	ASSERT_NE(NULL, q);
	q->fn = do_balance;
	if (variant->resumes)
		q->args.flags = BTRFS_BALANCE_RESUME;
	else
		data_request(&q->args);
	job_run(_metadata, q);
	wait_for_balance_mutex(_metadata, q);

	memset(&wp, 0, sizeof(wp));
	wp.range.start = (unsigned long)map;
	wp.range.len = sysconf(_SC_PAGESIZE);
	wp.mode = 0;
	ASSERT_EQ(0, ioctl(w->fs.uffd, UFFDIO_WRITEPROTECT, &wp))
		TH_LOG("UFFDIO_WRITEPROTECT: %s", strerror(errno));
	EXPECT_EQ(0, job_join(x));
	EXPECT_EQ(-ENOTCONN, job_join(r));
	EXPECT_EQ(variant->want, job_join(q))
		TH_LOG("the %s queued behind the resume got %d%s",
		       variant->resumes ? "resume" : "start", q->ret,
		       q->ret == EXCL_BUSY ?
		       " (BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS)" : "");
	expect_no_balance(_metadata, &w->fs);
}

/* ---- 2. Remount read-only and back during a paused balance ---- */

FIXTURE(remount) {
	struct world w;
};

FIXTURE_VARIANT(remount) {
	bool skip_balance;	/* remounted read-write with skip_balance */
};

/* Upstream's semantics: a read-write remount resumes a paused balance. */
FIXTURE_VARIANT_ADD(remount, read_write_resumes) {
	.skip_balance = false,
};

FIXTURE_VARIANT_ADD(remount, read_write_with_skip_balance_keeps_it_paused) {
	.skip_balance = true,
};

FIXTURE_SETUP(remount)
{
	if (!world_setup(_metadata, &self->w.fs, 2, 2, "single", "raid1",
			 "256M",
			 MNT_FLAGS))
		return;
	make_data_chunks(_metadata, &self->w.fs, 3);
}

FIXTURE_TEARDOWN(remount)
{
	world_teardown(_metadata, &self->w);
}

#define RO_THREADS	4

struct ro_calls {
	int fd;
	int id;
	pthread_t tid;
	pthread_barrier_t *barrier;
	int ret[NR_OPS];
	struct btrfs_ioctl_balance_args progress;
};

/* Each thread makes the five calls, in an order of its own. */
static void *ro_thread(void *p)
{
	struct ro_calls *rc = p;
	struct btrfs_ioctl_balance_args a;
	int i;

	pthread_barrier_wait(rc->barrier);
	for (i = 0; i < NR_OPS; i++) {
		enum op op = (enum op)((i + rc->id) % NR_OPS);

		if (op == OP_START) {
			convert_request(&a, RAID1);
			rc->ret[op] = balance_v2(rc->fd, &a);
		} else {
			rc->ret[op] = call_op(rc->fd, op, op == OP_PROGRESS ?
					      &rc->progress : &a);
		}
	}
	return NULL;
}

/*
 * A convert to raid1, paused after one chunk, then the mount remounted
 * read-only with readers on it.  Read-only, from four threads at once:
 * resume, a new start and cancel get -EROFS, pause -ENOTCONN (nothing
 * runs), progress the paused balance; it stays paused with its item.  Then
 * read-write again while a thread resumes in a loop: it gets -EROFS until
 * the mount is writable; then, by default, the remount has resumed the
 * balance (btrfs_start_pre_rw_mount() -> btrfs_resume_balance_async(),
 * held here at its thread) and the resume gets -EINPROGRESS; with
 * skip_balance it stays paused and that resume runs it to its end.
 */
TEST_F_TIMEOUT(remount, read_only_keeps_the_paused_balance_and_refuses_changes,
	       300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct balance_item_state item;
	struct ro_calls rc[RO_THREADS];
	pthread_barrier_t barrier;
	struct world *w = &self->w;
	struct chunk_list before;
	struct job *spin;
	int i, ndata, ret;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	ndata = count_type(&before, BTRFS_BLOCK_GROUP_DATA);
	convert_request(&a, RAID1);
	start_held(_metadata, w, &a, 1);
	pause_held(_metadata, w);
	EXPECT_EQ(1ULL, w->bal->args.stat.completed);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);

	/* Read-only with readers of the setup's files on it. */
	load_start(_metadata, w, 0, 2);
	load_wait(_metadata, w, 0, 4);
	ASSERT_EQ(0, remount(w->fs.env.mnt, MS_RDONLY, NULL));
	ASSERT_TRUE(mount_read_only(w->fs.env.mnt));

	ASSERT_EQ(0, pthread_barrier_init(&barrier, NULL, RO_THREADS));
	for (i = 0; i < RO_THREADS; i++) {
		rc[i].fd = w->fs.fd;
		rc[i].id = i;
		rc[i].barrier = &barrier;
		ASSERT_EQ(0, pthread_create(&rc[i].tid, NULL, ro_thread,
					    &rc[i]));
	}
	for (i = 0; i < RO_THREADS; i++)
		pthread_join(rc[i].tid, NULL);
	pthread_barrier_destroy(&barrier);
	for (i = 0; i < RO_THREADS; i++) {
		EXPECT_EQ(-EROFS, rc[i].ret[OP_RESUME]);
		EXPECT_EQ(-EROFS, rc[i].ret[OP_START]);
		EXPECT_EQ(-EROFS, rc[i].ret[OP_CANCEL]);
		EXPECT_EQ(-ENOTCONN, rc[i].ret[OP_PAUSE]);
		EXPECT_EQ(0, rc[i].ret[OP_PROGRESS]);
		EXPECT_EQ(0ULL, rc[i].progress.state);
		EXPECT_EQ((__u64)BTRFS_BALANCE_DATA, rc[i].progress.flags);
		EXPECT_EQ((__u64)RAID1, rc[i].progress.data.target);
		EXPECT_EQ(1ULL, rc[i].progress.stat.completed);
	}
	load_finish(_metadata, w);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	ASSERT_EQ(0, balance_item_read(w->fs.fd, &item));
	EXPECT_EQ(1ULL, item.completed);
	verify_all(_metadata, w);

	/* Read-write again, a resume racing the remount. */
	kmsg_end(&w->fs.kmsg);
	ASSERT_EQ(0, kmsg_start(&w->fs.kmsg));
	if (!variant->skip_balance)
		ASSERT_EQ(0, balance_hold_set(HOLD_RESUME_THREAD));
	spin = job_new(_metadata, w);
	ASSERT_NE(NULL, spin);
	spin->fn = do_resume_until_writable;
	job_run(_metadata, spin);
	ret = remount(w->fs.env.mnt, 0,
		      variant->skip_balance ? "skip_balance" : NULL);
	ASSERT_EQ(0, ret) TH_LOG("remount read-write: %s", strerror(-ret));
	ASSERT_FALSE(mount_read_only(w->fs.env.mnt));

	if (!variant->skip_balance) {
		EXPECT_EQ(-EINPROGRESS, job_join(spin));
		wait_held(_metadata, NULL, HOLD_RESUME_THREAD);
		ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
		EXPECT_EQ((__u64)ST_RUNNING, p.state);
		EXPECT_EQ((__u64)(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME),
			  p.flags);
		EXPECT_EQ(1ULL, p.stat.completed);
		expect_exclop(_metadata, &w->fs, "balance");
		ASSERT_EQ(0, balance_hold_set(0));
		ret = wait_balance_gone(w->fs.fd, HANG_MS);
		ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end");
		expect_log(_metadata, &w->fs,
			   "balance: resume -dconvert=raid1\n");
	} else {
		/* The remount left it paused: the racing resume ran it. */
		EXPECT_EQ(0, job_join(spin));
		expect_log(_metadata, &w->fs, "balance: resume skipped");
		EXPECT_EQ((__u64)(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME),
			  spin->args.flags);
		EXPECT_EQ((__u64)ndata, spin->args.stat.expected);
		EXPECT_EQ((__u64)ndata, spin->args.stat.completed);
	}
	TH_LOG("the resume got -EROFS %d times before the mount was writable",
	       spin->count);
	expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_all(_metadata, w);
}

/* ---- 3. Unmount during a running balance ---- */

FIXTURE(unmount) {
	struct world w;
};

FIXTURE_VARIANT(unmount) {
	unsigned long hold;	/* where the balance is when unmounted */
	bool skip_balance;	/* the next mount: skip_balance, else resume */
	__u64 relocated;	/* chunks relocated when it pauses */
};

FIXTURE_VARIANT_ADD(unmount, between_chunks_then_resumed_at_mount) {
	.hold = HOLD_RELOCATION,
	.skip_balance = false,
	.relocated = 2,
};

FIXTURE_VARIANT_ADD(unmount, inside_a_block_group_then_skip_balance) {
	.hold = HOLD_IN_RELOCATION,
	.skip_balance = true,
	.relocated = 1,
};

FIXTURE_SETUP(unmount)
{
	if (!world_setup(_metadata, &self->w.fs, 2, 2, "single", "raid1",
			 "256M",
			 MNT_FLAGS))
		return;
	make_data_chunks(_metadata, &self->w.fs, 3);
}

FIXTURE_TEARDOWN(unmount)
{
	world_teardown(_metadata, &self->w);
}

/*
 * A full balance paused after one chunk and unmounted; the next mount
 * resumes it in the btrfs-balance thread (an unmount cannot happen while
 * the ioctl runs: its file keeps the mount busy).  The resumed balance
 * relocates its second chunk under writers and readers (held inside it);
 * then, held between chunks or inside that one, the load stops and the
 * unmount waits in btrfs_pause_balance() until the hold is released, and
 * returns 0.  The item survives with the chunks relocated so far; the next
 * mount resumes it to its end, or, with skip_balance, keeps it paused for
 * the ioctl to resume.  Each chunk of the start is relocated once (the one
 * stopped inside, twice), every file reads back.
 */
TEST_F_TIMEOUT(unmount, unmount_pauses_a_running_balance_and_it_resumes, 300)
{
	struct btrfs_ioctl_balance_args a, p, r;
	struct balance_item_state item;
	struct world *w = &self->w;
	struct chunk_list before;
	struct job *um;
	__u64 end, bound, n;
	int ret;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	n = before.n;
	bound = chunks_end(&before);
	ASSERT_LE(4ULL, n);
	full_request(&a);
	start_held(_metadata, w, &a, 1);
	pause_held(_metadata, w);
	EXPECT_EQ(1ULL, w->bal->args.stat.completed);
	world_umount(_metadata, &w->fs);

	/* Resumed at mount, held before its second chunk. */
	world_mount_held(_metadata, &w->fs, w->fs.ndevs, MNT_FLAGS, NULL,
			 HOLD_RELOCATION);
	wait_held(_metadata, NULL, HOLD_RELOCATION);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ((__u64)ST_RUNNING, p.state);
	EXPECT_EQ((__u64)(FULL | BTRFS_BALANCE_RESUME), p.flags);
	EXPECT_EQ(1ULL, p.stat.completed);

	/* Under load: into the second chunk, and for one variant past it. */
	load_start(_metadata, w, 2, 2);
	load_wait(_metadata, w, 2, 4);
	ASSERT_EQ(0, balance_hold_set(HOLD_IN_RELOCATION));
	wait_held(_metadata, NULL, HOLD_IN_RELOCATION);
	load_wait(_metadata, w, 4, 8);
	if (variant->hold == HOLD_RELOCATION) {
		ASSERT_EQ(0, balance_hold_set(HOLD_RELOCATION));
		wait_held(_metadata, NULL, HOLD_RELOCATION);
	}
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ((__u64)ST_RUNNING, p.state);
	EXPECT_EQ(variant->relocated, p.stat.completed);
	load_finish(_metadata, w);

	/* The unmount waits for the balance to pause, then returns 0. */
	close(w->fs.fd);
	w->fs.fd = -1;
	um = job_new(_metadata, w);
	ASSERT_NE(NULL, um);
	um->fn = do_umount;
	um->path = w->fs.env.mnt;
	job_run(_metadata, um);
	end = now_ms() + HANG_MS;
	while (!job_done(um) && !task_waits_in(um->task,
					       "btrfs_pause_balance")) {
		ASSERT_GT(end, now_ms()) TH_LOG("umount never waits");
	}
	ASSERT_FALSE(job_done(um))
		TH_LOG("umount returned (%d) while the balance ran", um->ret);
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, job_join(um));
	w->fs.mounted = false;
	expect_log(_metadata, &w->fs, "balance: paused");

	if (!variant->skip_balance) {
		world_mount_held(_metadata, &w->fs, w->fs.ndevs, MNT_FLAGS,
				 NULL, HOLD_RESUME_THREAD);
		wait_held(_metadata, NULL, HOLD_RESUME_THREAD);
		ASSERT_EQ(0, balance_item_read(w->fs.fd, &item));
		EXPECT_EQ(variant->relocated, item.completed);
		EXPECT_EQ(bound, item.bound);
		ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
		EXPECT_EQ((__u64)ST_RUNNING, p.state);
		EXPECT_EQ((__u64)(FULL | BTRFS_BALANCE_RESUME), p.flags);
		EXPECT_EQ(variant->relocated, p.stat.completed);
		ASSERT_EQ(0, balance_hold_set(0));
		ret = wait_balance_gone(w->fs.fd, HANG_MS);
		ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end");
		expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	} else {
		world_mount(_metadata, &w->fs, w->fs.ndevs, MNT_FLAGS,
			    "skip_balance");
		expect_log(_metadata, &w->fs, "balance: resume skipped");
		expect_paused(_metadata, &w->fs, FULL | BTRFS_BALANCE_RESUME,
			      &p);
		EXPECT_EQ(variant->relocated, p.stat.completed);
		ASSERT_EQ(0, balance_item_read(w->fs.fd, &item));
		EXPECT_EQ(variant->relocated, item.completed);
		EXPECT_EQ(bound, item.bound);
		verify_all(_metadata, w);
		ASSERT_EQ(0, resume(w->fs.fd, &r));
		EXPECT_EQ(n, r.stat.expected);
		EXPECT_EQ(n, r.stat.completed);
	}
	expect_no_balance(_metadata, &w->fs);
	expect_each_relocated_once(_metadata, &w->fs, &before, bound,
				   variant->hold == HOLD_IN_RELOCATION ?
				   (int)n - 2 : -1);
	expect_none_below(_metadata, &w->fs, bound);
	verify_all(_metadata, w);
}

/* ---- 4. Device add and remove racing a balance start ---- */

FIXTURE(devices) {
	struct world w;
};

FIXTURE_SETUP(devices)
{
	if (!world_setup(_metadata, &self->w.fs, 2, 3, "single", "raid1",
			 "256M",
			 MNT_FLAGS))
		return;
	make_data_chunks(_metadata, &self->w.fs, 3);
}

FIXTURE_TEARDOWN(devices)
{
	world_teardown(_metadata, &self->w);
}

#define RACE_ROUNDS	6

/*
 * A device add and a balance start released together by a barrier, then a
 * removal of that device and a balance start, three times each (the device
 * added or removed first when the race left it otherwise).  Each gets 0 or the
 * exclusive operation error BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS (a
 * positive value); never both that error (one of them took the exclusive
 * operation); both 0 when one ended before the other began.  The device
 * count, in memory and in the chunk tree, is what the device calls
 * reported.
 */
TEST_F_TIMEOUT(devices, add_or_remove_racing_a_balance_start, 300)
{
	const char *spare = self->w.fs.env.devs[2];
	struct btrfs_ioctl_balance_args a;
	pthread_barrier_t barrier;
	struct world *w = &self->w;
	int outcomes[2][3] = { { 0 } };	/* [add?][dev won, balance won, both] */
	struct job *dev, *bal;
	bool in_fs = false, adding;
	int round, rd, rb;

	data_request(&a);
	for (round = 0; round < RACE_ROUNDS; round++) {
		adding = !(round % 2);
		if (adding == in_fs) {
			rd = adding ? remove_device(w->fs.fd, spare) :
				      add_device(w->fs.fd, spare);
			ASSERT_EQ(0, rd) TH_LOG("round %d: make the race",
						round);
			in_fs = !in_fs;
			w->fs.ndevs = 2 + in_fs;
		}
		ASSERT_EQ(0, pthread_barrier_init(&barrier, NULL, 2));
		dev = job_new(_metadata, w);
		ASSERT_NE(NULL, dev);
		dev->barrier = &barrier;
		if (adding) {
			dev->fn = do_add;
			dev->path = spare;
		} else {
			/* By devid: no superblock read before the race. */
			dev->fn = do_remove;
			dev->arg = devid_of(w->fs.fd, spare);
			ASSERT_LT(0, dev->arg) TH_LOG("%s not found", spare);
		}
		bal = job_new(_metadata, w);
		ASSERT_NE(NULL, bal);
		bal->fn = do_balance;
		bal->args = a;
		bal->barrier = &barrier;
		/*
		 * The thread that reaches the barrier last leaves it first,
		 * the other one has to be woken: take turns.
		 */
		if ((round / 2) % 2) {
			job_run(_metadata, bal);
			job_run(_metadata, dev);
		} else {
			job_run(_metadata, dev);
			job_run(_metadata, bal);
		}
		rd = job_join(dev);
		rb = job_join(bal);
		pthread_barrier_destroy(&barrier);

		EXPECT_TRUE(rd == 0 || rd == EXCL_BUSY)
			TH_LOG("round %d: device %s: %d", round,
			       adding ? "add" : "remove", rd);
		EXPECT_TRUE(rb == 0 || rb == EXCL_BUSY)
			TH_LOG("round %d: balance: %d", round, rb);
		EXPECT_FALSE(rd == EXCL_BUSY && rb == EXCL_BUSY)
			TH_LOG("round %d: both refused", round);
		if (rb == 0)
			EXPECT_EQ(0ULL, bal->args.state);
		if (rd == 0)
			in_fs = adding;
		w->fs.ndevs = 2 + in_fs;
		outcomes[adding][rd == 0 && rb == 0 ? 2 : rd == 0 ? 0 : 1]++;
		expect_devices(_metadata, w, 2 + in_fs);
		expect_exclop(_metadata, &w->fs, "none");
		expect_no_balance(_metadata, &w->fs);
	}
	TH_LOG("add: add won %d, balance won %d, both in turn %d",
	       outcomes[1][0], outcomes[1][1], outcomes[1][2]);
	TH_LOG("remove: remove won %d, balance won %d, both in turn %d",
	       outcomes[0][0], outcomes[0][1], outcomes[0][2]);
	verify_all(_metadata, w);
}

/*
 * A balance held running: adding the spare, removing a device and a second
 * balance start are refused with the exclusive operation error, nothing
 * changes; released, it ends, and then the add and the removal work.
 */
TEST_F_TIMEOUT(devices, add_and_remove_are_refused_while_a_balance_runs, 300)
{
	const char *spare = self->w.fs.env.devs[2];
	struct btrfs_ioctl_balance_args a, again;
	struct world *w = &self->w;

	data_request(&a);
	start_held(_metadata, w, &a, 0);
	EXPECT_EQ(EXCL_BUSY, add_device(w->fs.fd, spare));
	EXPECT_EQ(EXCL_BUSY, remove_device(w->fs.fd, w->fs.env.devs[1]));
	again = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fs.fd, &again));
	expect_exclop(_metadata, &w->fs, "balance");
	expect_devices(_metadata, w, 2);
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, job_join(w->bal));
	EXPECT_EQ(w->bal->args.stat.expected, w->bal->args.stat.completed);
	expect_no_balance(_metadata, &w->fs);

	ASSERT_EQ(0, add_device(w->fs.fd, spare));
	w->fs.ndevs = 3;
	expect_devices(_metadata, w, 3);
	ASSERT_EQ(0, remove_device(w->fs.fd, spare));
	w->fs.ndevs = 2;
	expect_devices(_metadata, w, 2);
	verify_all(_metadata, w);
}

static int do_progress(struct job *j)
{
	return balance_progress(j->fd, &j->args);
}

/*
 * Whether the @n jobs of @j end within @ms.  Only for calls that must not
 * wait at all: a bound that a correct call never comes near, not a timing.
 */
#define REFUSE_MS	(10 * 1000)
static bool jobs_end_within(struct job **j, int n, unsigned int ms)
{
	__u64 end = now_ms() + ms;
	int i;

	for (i = 0; i < n; i++) {
		while (!job_done(j[i])) {
			if (now_ms() >= end)
				return false;
			usleep(1000);
		}
	}
	return true;
}

/*
 * The five balance calls from five threads at once, released by a barrier,
 * while another exclusive operation (@op_name, as sysfs names it) holds and
 * no balance exists: a start and a resume get the exclusive operation
 * error, pause, cancel and progress -ENOTCONN.  None of them waits; the
 * hold points are cleared before they are joined, so that one that waits
 * fails instead of hanging the test.
 */
static void expect_refused_beside(struct __test_metadata *_metadata,
				  struct world *w, const char *op_name)
{
	pthread_barrier_t barrier;
	struct job *j[NR_OPS];
	int op;

	ASSERT_EQ(0, pthread_barrier_init(&barrier, NULL, NR_OPS));
	for (op = 0; op < NR_OPS; op++) {
		j[op] = job_new(_metadata, w);
		ASSERT_NE(NULL, j[op]);
		j[op]->barrier = &barrier;
		j[op]->fn = do_ctl;
		switch (op) {
		case OP_PROGRESS:
			j[op]->fn = do_progress;
			break;
		case OP_PAUSE:
			j[op]->arg = BTRFS_BALANCE_CTL_PAUSE;
			break;
		case OP_CANCEL:
			j[op]->arg = BTRFS_BALANCE_CTL_CANCEL;
			break;
		case OP_RESUME:
			j[op]->fn = do_balance;
			j[op]->args.flags = BTRFS_BALANCE_RESUME;
			break;
		case OP_START:
			j[op]->fn = do_balance;
			data_request(&j[op]->args);
			break;
		}
	}
	for (op = 0; op < NR_OPS; op++)
		job_run(_metadata, j[op]);
	EXPECT_TRUE(jobs_end_within(j, NR_OPS, REFUSE_MS))
		TH_LOG("balance calls wait beside the %s instead of failing",
		       op_name);
	/* A call that waits for a held operation: let it go on. */
	EXPECT_EQ(0, balance_hold_set(0));
	for (op = 0; op < NR_OPS; op++)
		job_join(j[op]);
	pthread_barrier_destroy(&barrier);
	EXPECT_EQ(-ENOTCONN, j[OP_PROGRESS]->ret);
	EXPECT_EQ(-ENOTCONN, j[OP_PAUSE]->ret);
	EXPECT_EQ(-ENOTCONN, j[OP_CANCEL]->ret);
	EXPECT_EQ(EXCL_BUSY, j[OP_RESUME]->ret);
	EXPECT_EQ(EXCL_BUSY, j[OP_START]->ret);
	expect_exclop(_metadata, &w->fs, op_name);
	EXPECT_EQ(0, balance_item_present(w->fs.fd));
}

/*
 * A device add takes the exclusive operation before it reads its
 * arguments: with them on a userfaultfd page it stops there, inside
 * memdup_user(), until the test provides them.  Meanwhile the balance
 * calls, all at once, are refused.  Then the add ends with the spare in,
 * and a balance starts and ends.
 */
TEST_F_TIMEOUT(devices, balance_calls_are_refused_while_a_device_add_runs, 300)
{
	const char *spare = self->w.fs.env.devs[2];
	long page = sysconf(_SC_PAGESIZE);
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct uffd_msg msg;
	struct job *add;
	void *map;

	ASSERT_GE((size_t)page, sizeof(struct btrfs_ioctl_vol_args));
	map = uffd_page(_metadata, &w->fs);
	add = job_new(_metadata, w);
	ASSERT_NE(NULL, add);
	add->fn = do_add;
	add->ptr = map;
	job_run(_metadata, add);
	uffd_wait(_metadata, &w->fs, &msg,
		  "the device add never read its arguments");
	EXPECT_FALSE(job_done(add));
	expect_refused_beside(_metadata, w, "device add");
	EXPECT_FALSE(job_done(add));
	expect_devices(_metadata, w, 2);

	uffd_give_dev_args(_metadata, &w->fs, map, spare);
	ASSERT_EQ(0, job_join(add)) TH_LOG("add %s", spare);
	w->fs.ndevs = 3;
	expect_devices(_metadata, w, 3);
	expect_exclop(_metadata, &w->fs, "none");

	data_request(&a);
	ASSERT_EQ(0, balance_v2(w->fs.fd, &a));
	EXPECT_EQ(a.stat.expected, a.stat.completed);
	expect_no_balance(_metadata, &w->fs);
	verify_all(_metadata, w);
}

/* Chunks of @l with a stripe on device @devid. */
static int chunks_on(const struct chunk_list *l, __u64 devid)
{
	__u32 s;
	int i, n = 0;

	for (i = 0; i < l->n; i++) {
		for (s = 0; s < l->c[i].num_stripes; s++) {
			if (l->c[i].stripes[s].devid == devid) {
				n++;
				break;
			}
		}
	}
	return n;
}

/*
 * The spare, added, gets the data chunks of a balance (the allocator takes
 * the device with the most free space); its removal relocates them again,
 * through the relocation code balance uses: held inside that relocation, it
 * holds the exclusive operation, and the balance calls, all at once, are
 * refused.  Released, the device is gone; then a balance starts and ends.
 */
TEST_F_TIMEOUT(devices, balance_calls_are_refused_while_a_device_remove_runs,
	       300)
{
	const char *spare = self->w.fs.env.devs[2];
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct chunk_list l;
	struct job *rm;

	ASSERT_EQ(0, add_device(w->fs.fd, spare));
	w->fs.ndevs = 3;
	expect_devices(_metadata, w, 3);
	data_request(&a);
	ASSERT_EQ(0, balance_v2(w->fs.fd, &a));
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l));
	ASSERT_LT(0, chunks_on(&l, 3)) TH_LOG("no chunk on the spare");

	ASSERT_EQ(0, balance_hold_set(HOLD_IN_RELOCATION));
	rm = job_new(_metadata, w);
	ASSERT_NE(NULL, rm);
	rm->fn = do_remove;
	rm->path = spare;
	job_run(_metadata, rm);
	wait_held(_metadata, rm, HOLD_IN_RELOCATION);
	expect_refused_beside(_metadata, w, "device remove");
	EXPECT_FALSE(job_done(rm));
	expect_devices(_metadata, w, 3);

	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, job_join(rm)) TH_LOG("remove %s", spare);
	w->fs.ndevs = 2;
	expect_devices(_metadata, w, 2);
	expect_exclop(_metadata, &w->fs, "none");
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l));
	EXPECT_EQ(0, chunks_on(&l, 3));

	data_request(&a);
	ASSERT_EQ(0, balance_v2(w->fs.fd, &a));
	expect_no_balance(_metadata, &w->fs);
	verify_all(_metadata, w);
}

/* ---- 5. The block-group reclaim worker holds the exclusive operation ---- */

FIXTURE(reclaim) {
	struct world w;
};

FIXTURE_SETUP(reclaim)
{
	world_setup(_metadata, &self->w.fs, 2, 2, "single", "raid1", "256M",
		    MNT_FLAGS);
}

FIXTURE_TEARDOWN(reclaim)
{
	world_teardown(_metadata, &self->w);
}

/* Write @val to /sys/fs/btrfs/<fsid>/@attr of @w. */
static void fs_sysfs_write(struct __test_metadata *_metadata, struct world *w,
			   const char *attr, const char *val)
{
	int fd = fs_sysfs_open(w->fs.fd, attr, O_WRONLY);

	ASSERT_LE(0, fd) TH_LOG("open %s: %s", attr, strerror(-fd));
	ASSERT_EQ((ssize_t)strlen(val), write(fd, val, strlen(val)))
		TH_LOG("write %s to %s: %s", val, attr, strerror(errno));
	close(fd);
}

/*
 * The reclaim worker (btrfs_reclaim_bgs_work()) takes the exclusive
 * operation as a balance, without a balance: held there, before it looks at
 * its block groups, it keeps it while the balance calls come, all at once.
 * They are refused as beside any other exclusive operation, at once: a
 * start or a resume must not wait for the worker, which may relocate for
 * minutes.  To get the worker queued, the data block group of mkfs is
 * filled to three quarters and half of it freed, across a reclaim threshold
 * of half; BTRFS_IOC_SYNC commits the free and wakes the cleaner, which
 * queues the worker.  Released, the worker relocates that block group, and
 * then a balance starts and ends.
 */
TEST_F_TIMEOUT(reclaim, balance_calls_are_refused_while_the_reclaim_worker_runs,
	       300)
{
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	char path[PATH_SIZE];
	__u64 end, bad = 0;

	ASSERT_EQ(0, balance_hold_set(HOLD_RECLAIM));
	fs_sysfs_write(_metadata, w, "allocation/data/bg_reclaim_threshold",
		       "50");
	ASSERT_EQ(0, write_pattern(w->fs.env.mnt, 0, 3 * SZ_1M, SZ_1M,
				   PATTERN_FSYNC));
	ASSERT_EQ(0, write_pattern(w->fs.env.mnt, 1, 3 * SZ_1M, SZ_1M,
				   PATTERN_FSYNC));
	ASSERT_EQ(0, ioctl(w->fs.fd, BTRFS_IOC_SYNC, NULL));
	pattern_path(path, w->fs.env.mnt, 0);
	ASSERT_EQ(0, unlink(path));
	end = now_ms() + HANG_MS;
	while (balance_hold_wait(HOLD_RECLAIM, 1000) == -ETIMEDOUT) {
		ASSERT_EQ(0, ioctl(w->fs.fd, BTRFS_IOC_SYNC, NULL));
		ASSERT_GT(end, now_ms())
			TH_LOG("the reclaim worker never ran");
	}
	expect_exclop(_metadata, &w->fs, "balance");
	EXPECT_EQ(-ENOTCONN, balance_progress(w->fs.fd, &a));

	expect_refused_beside(_metadata, w, "balance");

	ASSERT_EQ(0, balance_hold_set(0));
	data_request(&a);
	end = now_ms() + HANG_MS;
	/* The worker may still hold it: a caller that is told so retries. */
	while (balance_v2(w->fs.fd, &a) == EXCL_BUSY) {
		ASSERT_GT(end,
			  now_ms()) TH_LOG("the reclaim worker never ended");
		usleep(10000);
		data_request(&a);
	}
	EXPECT_EQ(a.stat.expected, a.stat.completed);
	expect_no_balance(_metadata, &w->fs);
	EXPECT_EQ(0, verify_pattern(w->fs.env.mnt, 1, 3 * SZ_1M, &bad, SZ_1M,
				    true))
		TH_LOG("f01 differs at %llu", (unsigned long long)bad);
}

/* ---- 6. A convert while writers allocate data chunks ---- */

/*
 * Writers that make the filesystem allocate data chunks all the time: each
 * preallocates a piece of 1/CHURN_PIECE_DIV of a data chunk into a file and
 * deletes it at once, and commits every CHURN_COMMIT_EVERY pieces
 * (BTRFS_IOC_SYNC, which also wakes the cleaner).  Between two commits the
 * pieces of the two writers take a chunk and a quarter of space, which the
 * deleted pieces only give back at the commit: more than the one chunk of a
 * profile that the cleaner never deletes.  Then the cleaner deletes the
 * others, emptied, and the next pieces need a new one.  Nothing stays: the
 * chunks a convert relocates hold at most the pieces of the moment, and the
 * writers never need more than about two chunks.
 */
#define CHURN_WRITERS		2
#define CHURN_PIECE_DIV		8
#define CHURN_COMMIT_EVERY	5
#define CHURN_PIECES		1000000	/* then a writer stops */

struct churn;

struct churn_writer {
	struct churn *c;
	int id;
	pthread_t tid;
	bool started;
	unsigned long pieces;	/* made and deleted, or refused for room */
	unsigned long commits;
	unsigned long enospc;	/* pieces refused for room */
	bool done;		/* it stopped, by the flag or the count */
};

struct churn {
	int fd;			/* the mount point */
	char mnt[PATH_MAX - 64];
	__u64 piece;
	bool stop;
	struct churn_writer th[CHURN_WRITERS];
	pthread_mutex_t lock;
	int errors;
	char error[256];
};

static void churn_error(struct churn *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&c->lock);
	if (!c->errors++) {
		va_start(ap, fmt);
		vsnprintf(c->error, sizeof(c->error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&c->lock);
}

/*
 * A piece the allocator has no room for at the moment (the space of the
 * deleted pieces comes back at the next commit, and a convert holds some
 * of it read-only) is counted and skipped: the next commit comes at once.
 */
static void *churn_thread(void *p)
{
	struct churn_writer *t = p;
	struct churn *c = t->c;
	char path[PATH_SIZE];
	unsigned long n;
	bool commit;
	int fd;

	snprintf(path, sizeof(path), "%s/churn%d", c->mnt, t->id);
	for (n = 0; n < CHURN_PIECES &&
	     !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE); n++) {
		commit = !((n + 1) % CHURN_COMMIT_EVERY);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			churn_error(c, "writer %d: create %s: %s", t->id, path,
				    strerror(errno));
			break;
		}
		if (fallocate(fd, 0, 0, c->piece)) {
			if (errno != ENOSPC) {
				churn_error(c,
					    "writer %d: fallocate %llu bytes: %s",
					    t->id, (unsigned long long)c->piece,
					    strerror(errno));
				close(fd);
				break;
			}
			__atomic_add_fetch(&t->enospc, 1, __ATOMIC_RELAXED);
			commit = true;
		}
		close(fd);
		if (unlink(path)) {
			churn_error(c, "writer %d: unlink %s: %s", t->id, path,
				    strerror(errno));
			break;
		}
		if (commit) {
			if (ioctl(c->fd, BTRFS_IOC_SYNC, NULL)) {
				churn_error(c, "writer %d: BTRFS_IOC_SYNC: %s",
					    t->id, strerror(errno));
				break;
			}
			__atomic_add_fetch(&t->commits, 1, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&t->pieces, n + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&t->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void churn_start(struct __test_metadata *_metadata, struct churn *c,
			struct world *w, __u64 piece)
{
	int i;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->fd = w->fs.fd;
	c->piece = piece;
	ASSERT_GT(sizeof(c->mnt), strlen(w->fs.env.mnt));
	memcpy(c->mnt, w->fs.env.mnt, strlen(w->fs.env.mnt) + 1);
	for (i = 0; i < CHURN_WRITERS; i++) {
		c->th[i].c = c;
		c->th[i].id = i;
		ASSERT_EQ(0, pthread_create(&c->th[i].tid, NULL, churn_thread,
					    &c->th[i]));
		c->th[i].started = true;
	}
}

/* Stop the writers; the number of errors they met. */
static int churn_stop(struct churn *c)
{
	int i;

	__atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
	for (i = 0; i < CHURN_WRITERS; i++) {
		if (c->th[i].started)
			pthread_join(c->th[i].tid, NULL);
		c->th[i].started = false;
	}
	return c->errors;
}

/*
 * Wait until each writer has made @more pieces after @since (its counts
 * then, updated to the new ones): the writers run when what comes next
 * starts.  A writer that stopped at its CHURN_PIECES is left out.
 */
static void churn_wait(struct __test_metadata *_metadata, struct churn *c,
		       unsigned long since[CHURN_WRITERS], unsigned long more)
{
	__u64 end = now_ms() + HANG_MS;
	unsigned long n;
	bool ready;
	int k;

	do {
		ASSERT_EQ(0, c->errors) TH_LOG("writers: %s", c->error);
		ASSERT_GT(end, now_ms()) TH_LOG("the writers do not progress");
		ready = true;
		for (k = 0; k < CHURN_WRITERS; k++) {
			n = __atomic_load_n(&c->th[k].pieces, __ATOMIC_ACQUIRE);
			ready = ready && (n >= since[k] + more ||
					  __atomic_load_n(&c->th[k].done,
							  __ATOMIC_ACQUIRE));
		}
		if (!ready)
			usleep(1000);
	} while (!ready);
	for (k = 0; k < CHURN_WRITERS; k++)
		since[k] = __atomic_load_n(&c->th[k].pieces, __ATOMIC_ACQUIRE);
}

/*
 * The relocations logged in @text ("relocating block group <start> flags
 * <type>[|<profile>]"): how many, into *@all, and how many of them were of
 * data chunks of profile @old that start at or above @from, into *@late:
 * with @from the end of the chunks there were just before the convert,
 * chunks of the old profile allocated as it started, which it found.
 */
static void count_relocations(const char *text, __u64 from, __u64 old,
			      int *all, int *late)
{
	const char *needle = "relocating block group ";
	const char *p, *flags;
	char name[32];
	__u64 start;
	char *end;
	size_t len;

	*all = *late = 0;
	for (p = text; p && (p = strstr(p, needle)); p = end) {
		start = strtoull(p + strlen(needle), &end, 10);
		if (strncmp(end, " flags ", 7))
			continue;
		(*all)++;
		flags = end + 7;
		len = strcspn(flags, "\n");
		if (len < 4 || strncmp(flags, "data", 4) || start < from)
			continue;
		/* "data" alone is single, else "data|<profile>". */
		if (len == 4)
			snprintf(name, sizeof(name), "single");
		else
			snprintf(name, sizeof(name), "%.*s", (int)(len - 5),
				 flags + 5);
		*late += !strcmp(name, profile_name(old));
	}
}

/*
 * The chunk items, with the usage of the block groups that have one: while
 * the writers run, a chunk may be in the tree without its block group item
 * (being made or deleted), which read_chunks() takes for an error.
 */
static int read_chunks_racing(int fd, struct chunk_list *l)
{
	struct btrfs_ioctl_search_key sk;
	int i, ret;

	l->n = 0;
	search_key_exact(&sk, BTRFS_CHUNK_TREE_OBJECTID,
			 BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
			 0, (__u64)-1);
	ret = tree_search(fd, &sk, chunk_item_cb, l);
	for (i = 0; i < l->n && !ret; i++) {
		ret = chunk_used(fd, &l->c[i]);
		if (ret == -ENOENT)
			ret = 0;
	}
	return ret;
}

static void log_chunks(struct __test_metadata *_metadata,
		       const struct chunk_list *l)
{
	char desc[128];
	int i;

	for (i = 0; i < l->n; i++)
		TH_LOG("  %s", chunk_desc(&l->c[i], desc, sizeof(desc)));
}

FIXTURE(convert_setup) {
	struct world w;
	struct churn churn;
};

FIXTURE_SETUP(convert_setup)
{
	world_setup(_metadata, &self->w.fs, 3, 3, "single", "raid1", NULL,
		    MNT_FLAGS);
}

FIXTURE_TEARDOWN(convert_setup)
{
	churn_stop(&self->churn);
	world_teardown(_metadata, &self->w);
}

/* Rounds, a convert each way: restriper.convert_rounds=N to change it. */
#define CONVERT_ROUNDS	20

/*
 * Data converted single -> raid1 -> single, CONVERT_ROUNDS times each way,
 * on 3 devices, while two writers make the filesystem allocate data chunks
 * all the time, so that some are allocated while a convert is being set
 * up: between the moment the balance takes its bound and the moment the
 * allocator sees the convert's target, a new chunk still gets the old
 * profile.  After each convert that returns 0, no data chunk of the old
 * profile may be left in the chunk tree.  A convert may end with -ENOSPC
 * when the writers hold the room its relocation needs at that moment
 * (btrfs_inc_block_group_ro()): such a convert is counted and not checked,
 * and each way at least one convert must return 0; any other error fails.
 * Whether a chunk falls into that window is up to the scheduler: a kernel
 * that handles it passes whatever the interleaving, and one that does not
 * fails only when the window was met.  The log says how many chunks of the
 * old profile allocated as a convert started it relocated (those it found).
 */
TEST_F_TIMEOUT(convert_setup, no_chunk_is_left_in_the_old_profile, 1200)
{
	static const __u64 targets[2] = {
		RAID1, BTRFS_AVAIL_ALLOC_BIT_SINGLE,
	};
	unsigned long since[CHURN_WRITERS] = { 0 };
	unsigned long pieces = 0, commits = 0, full = 0;
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct chunk_list l;
	__u64 chunk, first_end, from, t0;
	int rounds, round, dir, i, k, ret, left, all, late;
	int converts = 0, ok[2] = { 0 }, enospc = 0, errors = 0, bad = 0;
	int relocated = 0, met = 0, rounds_met = 0;
	char path[PATH_SIZE];
	size_t mark;

	rounds = (int)kernel_cmdline_num("convert_rounds", CONVERT_ROUNDS);
	ASSERT_LT(0, rounds);

	/* The size of the data chunks the kernel allocates here. */
	fill_data_chunks(_metadata, &w->fs, 1);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l));
	for (chunk = 0, from = 0, i = 0; i < l.n; i++) {
		if ((l.c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
		    l.c[i].start >= from) {
			chunk = l.c[i].length;
			from = l.c[i].start;
		}
	}
	snprintf(path, sizeof(path), "%s/fill01", w->fs.env.mnt);
	ASSERT_EQ(0, unlink(path));
	ASSERT_LE(CHURN_PIECE_DIV * SZ_1M, chunk);
	first_end = chunks_end(&l);
	TH_LOG("data chunks of %llu MiB; %d rounds; the writers preallocate and delete pieces of %llu MiB",
	       (unsigned long long)(chunk / SZ_1M), rounds,
	       (unsigned long long)(chunk / CHURN_PIECE_DIV / SZ_1M));

	t0 = now_ms();
	churn_start(_metadata, &self->churn, w, chunk / CHURN_PIECE_DIV);
	for (round = 0; round < rounds; round++) {
		bool round_met = false;

		for (dir = 0; dir < 2; dir++) {
			__u64 target = targets[dir];
			__u64 old = targets[!dir];

			/* The writers run as the convert starts. */
			churn_wait(_metadata, &self->churn, since,
				   2 * CHURN_COMMIT_EVERY);
			ASSERT_EQ(0, read_chunks_racing(w->fs.fd, &l));
			from = chunks_end(&l);
			ASSERT_EQ(0, kmsg_update(&w->fs.kmsg));
			mark = w->fs.kmsg.len;

			convert_request(&a, target);
			ret = balance_v2(w->fs.fd, &a);
			converts++;
			ASSERT_EQ(0, kmsg_update(&w->fs.kmsg));
			count_relocations(w->fs.kmsg.text ?
					  w->fs.kmsg.text + mark : NULL,
					  from, old, &all, &late);
			relocated += all;
			met += late;
			round_met |= late > 0;
			if (ret == -ENOSPC) {
				enospc++;
				TH_LOG("round %d: the convert to %s ended with -ENOSPC",
				       round, profile_name(target));
				continue;
			}
			EXPECT_EQ(0, ret)
				TH_LOG("round %d: the convert to %s returned %d (%s)",
				       round, profile_name(target), ret,
				       ret < 0 ? strerror(-ret) : "positive");
			if (ret) {
				errors++;
				continue;
			}
			ok[dir]++;

			ASSERT_EQ(0, read_chunks_racing(w->fs.fd, &l));
			left = count_type(&l, BTRFS_BLOCK_GROUP_DATA) -
			       count_chunks(&l, BTRFS_BLOCK_GROUP_DATA,
					    dir ? 0 : target);
			EXPECT_EQ(0, left)
				TH_LOG("round %d: the convert to %s returned 0 with %d data chunk(s) of another profile (the chunks ended at %llu before it; it relocated %d, %d of them %s at or above that):",
				       round, profile_name(target), left,
				       (unsigned long long)from, all, late,
				       profile_name(old));
			if (left) {
				bad++;
				log_chunks(_metadata, &l);
			}
		}
		rounds_met += round_met;
	}
	ASSERT_EQ(0, churn_stop(&self->churn))
		TH_LOG("writers: %s", self->churn.error);
	for (k = 0; k < CHURN_WRITERS; k++) {
		pieces += self->churn.th[k].pieces;
		commits += self->churn.th[k].commits;
		full += self->churn.th[k].enospc;
	}
	ASSERT_EQ(0, read_chunks_racing(w->fs.fd, &l));
	TH_LOG("%d converts in %llu s: %d to raid1 and %d to single returned 0, %d ended with -ENOSPC, %d with another error; %d left a data chunk of the old profile",
	       converts, (unsigned long long)((now_ms() - t0) / 1000),
	       ok[0], ok[1], enospc, errors, bad);
	TH_LOG("%d chunks relocated; %d of them data chunks of the old profile allocated as their convert started (in %d of %d rounds)",
	       relocated, met, rounds_met, rounds);
	TH_LOG("writers: %lu pieces (%lu refused for room), %lu commits; about %llu chunks of %llu MiB allocated in all, relocation copies and metadata included",
	       pieces, full, commits,
	       (unsigned long long)((chunks_end(&l) - first_end) / chunk),
	       (unsigned long long)(chunk / SZ_1M));
	EXPECT_EQ(0, bad);
	EXPECT_EQ(0, errors);
	EXPECT_LT(0, ok[0]) TH_LOG("no convert to raid1 returned 0");
	EXPECT_LT(0, ok[1]) TH_LOG("no convert to single returned 0");
}

TEST_HARNESS_MAIN
