// SPDX-License-Identifier: GPL-2.0
/*
 * The lifecycle of a btrfs balance: running, paused, resumed (by the ioctl
 * and at mount), canceled, and the races between these, made deterministic
 * with the balance hold points of CONFIG_BTRFS_DEBUG
 * (/sys/fs/btrfs/<fsid>/debug/balance_hold).
 *
 * Environment: BTRFS_TEST_DEVS, the block devices to use, space separated
 * (4 of them, each used by nothing else; they are reformatted); and
 * BTRFS_TEST_MNT, an empty directory to mount on (default /mnt/test).
 * mkfs.btrfs and btrfs must be in PATH.  Run as root.
 *
 * Every test makes a fresh filesystem whose data chunks each hold one file
 * of 1 MiB, so that relocating a chunk is cheap but never empty: a chunk
 * the walk relocates always takes transactions and I/O.  Its teardown
 * clears the hold points, unmounts and runs "btrfs check --readonly".
 *
 * A balance is never expected to be slow: HOLD_RELOCATION stops its walk
 * before a chunk (the balance is RUNNING then), HOLD_RESUME_THREAD stops
 * the mount-time resume thread, and the tests wait for states (progress,
 * the hold, the kernel stack of a thread) with timeouts that only fire on
 * a hang.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
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
#define MAX_CALLS	4
#define NO_SUCH_DEV	"/nonexistent/btrfs-balance-test"
#define NO_SUCH_DEVID	999
/* Waits that end on an event: only a hang reaches these. */
#define HANG_MS		(100 * 1000)

/* ---- Kernel calls in a thread ---- */

/*
 * A blocking call (pause, cancel, umount, remount, device add) made in a
 * thread, so that the test can look at the kernel while it waits.
 */
struct call {
	pthread_t tid;
	bool started;
	pid_t task;		/* the thread's id, for /proc/self/task */
	int (*fn)(struct call *c);
	int fd;
	long arg;
	const char *path;
	void *ptr;
	int ret;
	bool done;
};

static void *call_thread(void *p)
{
	struct call *c = p;

	pid_t task = syscall(SYS_gettid);

	__atomic_store_n(&c->task, task, __ATOMIC_RELEASE);
	c->ret = c->fn(c);
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static bool call_done(struct call *c)
{
	return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

static int call_join(struct call *c)
{
	if (c->started) {
		pthread_join(c->tid, NULL);
		c->started = false;
	}
	return c->ret;
}

static int do_balance_ctl(struct call *c)
{
	return balance_ctl(c->fd, (int)c->arg);
}

static int do_umount(struct call *c)
{
	return umount2(c->path, 0) ? -errno : 0;
}

static int remount(const char *mnt, unsigned long flags)
{
	return mount(NULL, mnt, NULL, MS_REMOUNT | flags, NULL) ? -errno : 0;
}

static int do_remount(struct call *c)
{
	return remount(c->path, c->arg);
}

static int do_add_dev(struct call *c)
{
	return xioctl(c->fd, BTRFS_IOC_ADD_DEV, c->ptr);
}

/* ---- A world: a fresh filesystem for each test ---- */

#include "btrfs_world.h"

/* A test: its filesystem (btrfs_world.h), its balance thread and calls. */
struct world {
	struct fs_world fs;
	struct balance_thread bt;
	struct call calls[MAX_CALLS];
};


static struct call *call_start(struct __test_metadata *_metadata,
			       struct world *w, int (*fn)(struct call *),
			       int fd, long arg, const char *path, void *ptr)
{
	struct call *c = NULL;
	__u64 end = now_ms() + HANG_MS;
	int i, ret;

	for (i = 0; i < MAX_CALLS && !c; i++)
		if (!w->calls[i].started)
			c = &w->calls[i];
	if (!c) {
		ASSERT_TRUE(false)
			TH_LOG("more than %d calls at once", MAX_CALLS);
		return NULL;
	}
	memset(c, 0, sizeof(*c));
	c->fn = fn;
	c->fd = fd;
	c->arg = arg;
	c->path = path;
	c->ptr = ptr;
	ret = pthread_create(&c->tid, NULL, call_thread, c);
	ASSERT_EQ(0, ret);
	c->started = true;
	while (!__atomic_load_n(&c->task, __ATOMIC_ACQUIRE) && now_ms() < end)
		usleep(1000);
	return c;
}

static void world_teardown(struct __test_metadata *_metadata, struct world *w)
{
	int i;

	world_teardown_begin(_metadata, &w->fs);
	/* A test that failed while its balance ran: stop the balance. */
	for (i = 0; w->bt.started && i < 600 && !balance_thread_done(&w->bt);
	     i++) {
		balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL);
		usleep(100 * 1000);
	}
	balance_thread_join(&w->bt);
	for (i = 0; i < MAX_CALLS; i++)
		call_join(&w->calls[i]);
	world_teardown_end(_metadata, &w->fs);
}

/* ---- Data: one file of DATA_FILE_SIZE in each data chunk ---- */

/* Data chunks whose profile is not @profile. */
static int count_data_not(const struct chunk_list *l, __u64 profile)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++)
		n += (l->c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
		     chunk_profile(l->c[i].type) != profile;
	return n;
}

static int count_moved(const struct chunk_list *before,
		       const struct chunk_list *after)
{
	int i, n = 0;

	for (i = 0; i < before->n; i++)
		n += chunk_moved(before, i, after);
	return n;
}

/* make_data_chunks(); each data chunk holds its file and nothing else. */
static void make_dataset(struct __test_metadata *_metadata, struct world *w,
			 int n)
{
	struct chunk_list l;
	char desc[128];
	int i;

	make_data_chunks(_metadata, &w->fs, n);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l));
	for (i = 0; i < l.n; i++) {
		if (!(l.c[i].type & BTRFS_BLOCK_GROUP_DATA))
			continue;
		ASSERT_EQ(DATA_FILE_SIZE, l.c[i].used)
			TH_LOG("%s", chunk_desc(&l.c[i], desc, sizeof(desc)));
	}
}

/* Read every file back from disk (caches dropped) and compare. */
static void verify_dataset(struct __test_metadata *_metadata, struct world *w)
{
	__u64 bad;
	int i, ret;

	ASSERT_EQ(0, drop_page_cache());
	for (i = 0; i < w->fs.nfiles; i++) {
		ret = verify_pattern_file(w->fs.env.mnt, i, DATA_FILE_SIZE,
					  &bad);
		ASSERT_EQ(0, ret)
			TH_LOG("f%02d: %s at offset %llu", i, strerror(-ret),
			       (unsigned long long)bad);
	}
}

/* ---- Requests ---- */

static int remove_devid(int fd, __u64 devid)
{
	struct btrfs_ioctl_vol_args_v2 va;

	memset(&va, 0, sizeof(va));
	va.flags = BTRFS_DEVICE_SPEC_BY_ID;
	va.devid = devid;
	return xioctl(fd, BTRFS_IOC_RM_DEV_V2, &va);
}

static int resize(int fd, const char *spec)
{
	struct btrfs_ioctl_vol_args va;

	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "%s", spec);
	return xioctl(fd, BTRFS_IOC_RESIZE, &va);
}

static int replace(int fd, __u64 srcdevid, const char *target)
{
	struct btrfs_ioctl_dev_replace_args ra;

	memset(&ra, 0, sizeof(ra));
	ra.cmd = BTRFS_IOCTL_DEV_REPLACE_CMD_START;
	ra.start.srcdevid = srcdevid;
	ra.start.cont_reading_from_srcdev_mode =
		BTRFS_IOCTL_DEV_REPLACE_CONT_READING_FROM_SRCDEV_MODE_ALWAYS;
	snprintf((char *)ra.start.tgtdev_name, sizeof(ra.start.tgtdev_name),
		 "%s", target);
	return xioctl(fd, BTRFS_IOC_DEV_REPLACE, &ra);
}

/* ---- Checks ---- */

/*
 * Wait until the resume thread of a mount refused to resume its balance:
 * it logs that the balance stays paused, or, if it does not keep it, the
 * balance is gone.
 */
static void wait_resume_given_up(struct __test_metadata *_metadata,
				 struct world *w)
{
	struct btrfs_ioctl_balance_args p;
	__u64 end = now_ms() + HANG_MS;

	while (!kmsg_contains(&w->fs.kmsg, "balance: not resumed") &&
	       balance_progress(w->fs.fd, &p) != -ENOTCONN) {
		ASSERT_GT(end,
			  now_ms()) TH_LOG("the resume thread never ended");
		usleep(10 * 1000);
	}
}

/* ---- Holding the balance ---- */

/*
 * Wait until a balance thread is held at @point; fail at once if the
 * balance thread of the world ended instead.
 */
static void wait_held(struct __test_metadata *_metadata, struct world *w,
		      unsigned long point)
{
	__u64 end = now_ms() + HANG_MS;
	unsigned long set, held;

	if (!w->bt.started) {	/* the resume thread of a mount */
		ASSERT_EQ(0, balance_hold_wait(point, HANG_MS))
			TH_LOG("never held at 0x%lx", point);
		return;
	}
	for (;;) {
		ASSERT_EQ(0, balance_hold_get(&set, &held));
		if (held & point)
			return;
		ASSERT_FALSE(balance_thread_done(&w->bt))
			TH_LOG("the balance ended (%d) before hold point 0x%lx",
			       w->bt.ret, point);
		ASSERT_GT(end, now_ms()) TH_LOG("never held at 0x%lx", point);
		usleep(1000);
	}
}

/*
 * Mount the world's filesystem, which has a paused balance: its resume
 * thread runs the counting pass and is held before the first chunk of the
 * relocation pass.
 */
static void mount_resume_held(struct __test_metadata *_metadata,
			      struct world *w)
{
	world_mount_held(_metadata, &w->fs, w->fs.ndevs, 0, NULL,
			 HOLD_RELOCATION);
	wait_held(_metadata, w, HOLD_RELOCATION);
}

/*
 * Start @a in the world's balance thread, held before the first chunk of
 * its relocation pass: it is running, its counting pass is done, and it
 * has relocated nothing.
 */
static void start_held(struct __test_metadata *_metadata, struct world *w,
		       const struct btrfs_ioctl_balance_args *a)
{
	ASSERT_EQ(0, balance_hold_set(HOLD_RELOCATION));
	ASSERT_EQ(0, balance_thread_start(&w->bt, w->fs.fd, a));
	wait_held(_metadata, w, HOLD_RELOCATION);
}

/*
 * The balance is held before a chunk: let it take exactly that chunk and
 * hold it again before the next one.  The hold is set again as soon as
 * the thread has left it, while it relocates the chunk; the test data
 * makes the chunks taken this way data chunks that are relocated, which
 * takes transactions and I/O.  Progress then tells that one chunk was
 * passed, no more.
 */
static void hold_step(struct __test_metadata *_metadata, struct world *w)
{
	struct btrfs_ioctl_balance_args p;
	__u64 end = now_ms() + HANG_MS;
	unsigned long set, held;
	__u64 considered;

	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	considered = p.stat.considered;
	ASSERT_EQ(0, balance_hold_set(0));
	do {
		ASSERT_EQ(0, balance_hold_get(&set, &held));
		ASSERT_GT(end, now_ms()) TH_LOG("the balance stays held");
	} while (held & HOLD_RELOCATION);
	ASSERT_EQ(0, balance_hold_set(HOLD_RELOCATION));
	wait_held(_metadata, w, HOLD_RELOCATION);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	ASSERT_EQ(considered + 1, p.stat.considered)
		TH_LOG("the walk passed more than one chunk in a step");
}

/*
 * Pause the held balance of the world's thread: the pause request is
 * seen before the hold lets the walk go on, so it stops right there.
 */
static void pause_held(struct __test_metadata *_metadata, struct world *w)
{
	struct call *pause;

	pause = call_start(_metadata, w, do_balance_ctl, w->fs.fd,
			   BTRFS_BALANCE_CTL_PAUSE, NULL, NULL);
	ASSERT_EQ(0, wait_balance_state(w->fs.fd, BTRFS_BALANCE_STATE_PAUSE_REQ,
					HANG_MS));
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, call_join(pause));
	ASSERT_EQ(-ECANCELED, balance_thread_join(&w->bt));
	EXPECT_EQ(0ULL, w->bt.args.state & BTRFS_BALANCE_STATE_RUNNING);
}

/*
 * Unmount while a balance runs (held, or not started: @w->fs.fd closed
 * first) and wait until the unmount waits for the balance to pause;
 * returns the unmount's call.  Fails if the unmount returned instead.
 */
static struct call *umount_waiting(struct __test_metadata *_metadata,
				   struct world *w)
{
	__u64 end = now_ms() + HANG_MS;
	struct call *um;

	close(w->fs.fd);
	w->fs.fd = -1;
	um = call_start(_metadata, w, do_umount, -1, 0, w->fs.env.mnt, NULL);
	while (!call_done(um) &&
	       !task_waits_in(um->task, "btrfs_pause_balance") &&
	       now_ms() < end)
		usleep(1000);
	ASSERT_FALSE(call_done(um))
		TH_LOG("umount returned (%d) without waiting for the balance",
		       um->ret);
	ASSERT_TRUE(task_waits_in(um->task, "btrfs_pause_balance"))
		TH_LOG("umount does not wait in btrfs_pause_balance");
	return um;
}

/* ---- The lifecycle, on three devices and a spare ---- */

FIXTURE(lifecycle) {
	struct world w;
};

FIXTURE_VARIANT(lifecycle) {
	int ndevs;		/* in the filesystem; one more is the spare */
	const char *size;	/* of each device in the filesystem */
	int nchunks;		/* data chunks, each holding a file */
};

/*
 * Single data in three chunks, converted to raid1: the walk meets the two
 * chunks the kernel allocated for f01 and f02 first, then the one of mkfs.
 */
FIXTURE_VARIANT_ADD(lifecycle, three_devices_and_a_spare) {
	.ndevs = 3,
	.size = "256M",
	.nchunks = 3,
};

FIXTURE_SETUP(lifecycle)
{
	if (!world_setup(_metadata, &self->w.fs, variant->ndevs,
			 variant->ndevs + 1, "single", "raid1", variant->size, 0))
		return;
	make_dataset(_metadata, &self->w, variant->nchunks);
}

FIXTURE_TEARDOWN(lifecycle)
{
	world_teardown(_metadata, &self->w);
}

TEST_F_TIMEOUT(lifecycle, progress_counters_only_grow_while_running, 300)
{
	struct btrfs_ioctl_balance_args a, again, p, p0, p1;
	struct btrfs_balance_progress last;
	struct world *w = &self->w;
	struct chunk_list before;
	__u64 ndata;
	int ret;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	ndata = count_type(&before, BTRFS_BLOCK_GROUP_DATA);
	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);

	/* Counted, nothing relocated yet. */
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p0));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p0.state);
	EXPECT_EQ(BTRFS_BALANCE_DATA, p0.flags);
	EXPECT_EQ(ndata, p0.stat.expected);
	EXPECT_EQ(0ULL, p0.stat.considered);
	EXPECT_EQ(0ULL, p0.stat.completed);
	expect_exclop(_metadata, &w->fs, "balance");
	/* A second start, or a resume, while one runs. */
	again = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fs.fd, &again));
	EXPECT_EQ(-EINPROGRESS, resume(w->fs.fd, &again));

	/* One chunk on: the counters grow, and only by it. */
	hold_step(_metadata, w);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p1));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p1.state);
	EXPECT_EQ(p0.stat.expected, p1.stat.expected);
	EXPECT_EQ(1ULL, p1.stat.considered);
	EXPECT_EQ(1ULL, p1.stat.completed);

	/* Released: they only grow until it ends. */
	last = p1.stat;
	ASSERT_EQ(0, balance_hold_set(0));
	while (!balance_thread_done(&w->bt)) {
		ret = balance_progress(w->fs.fd, &p);
		if (ret == -ENOTCONN)	/* just ended */
			break;
		ASSERT_EQ(0, ret);
		ASSERT_EQ(last.expected, p.stat.expected);
		ASSERT_LE(last.considered, p.stat.considered);
		ASSERT_LE(last.completed, p.stat.completed);
		ASSERT_LE(p.stat.completed, p.stat.expected);
		ASSERT_GE((__u64)before.n, p.stat.considered);
		last = p.stat;
		usleep(1000);
	}
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	EXPECT_LE(last.completed, w->bt.args.stat.completed);
	EXPECT_EQ(ndata, w->bt.args.stat.expected);
	EXPECT_EQ(ndata, w->bt.args.stat.completed);
	EXPECT_EQ((__u64)before.n, w->bt.args.stat.considered);
	EXPECT_EQ(0ULL, w->bt.args.state);
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, pause_keeps_the_balance_and_resume_ends_it, 300)
{
	struct btrfs_ioctl_balance_args a, again, p, r;
	struct world *w = &self->w;
	struct chunk_list before, paused;
	__u64 left;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	pause_held(_metadata, w);
	expect_log(_metadata, &w->fs, "balance: paused");

	/* What the paused ioctl returned agrees with what it did. */
	ASSERT_EQ(0, read_chunks(w->fs.fd, &paused));
	EXPECT_EQ(1ULL, w->bt.args.stat.completed);
	EXPECT_EQ(1, count_moved(&before, &paused));
	left = count_data_not(&paused, RAID1);
	EXPECT_EQ(w->bt.args.stat.expected - 1, left);

	/* Paused: kept in memory and on disk, not running. */
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	EXPECT_EQ(BTRFS_BALANCE_ARGS_CONVERT, p.data.flags);
	EXPECT_EQ(RAID1, p.data.target);
	EXPECT_EQ(w->bt.args.stat.expected, p.stat.expected);
	EXPECT_EQ(w->bt.args.stat.considered, p.stat.considered);
	EXPECT_EQ(w->bt.args.stat.completed, p.stat.completed);
	EXPECT_EQ(-ENOTCONN, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_PAUSE));
	again = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fs.fd, &again));
	/* Progress copies out only when there is a balance: there is one. */
	EXPECT_EQ(-EFAULT,
		  xioctl(w->fs.fd, BTRFS_IOC_BALANCE_PROGRESS, (void *)1));

	/*
	 * Resume: converts what is left, with the args it started with, and
	 * ends.  The counters are the whole balance's: the chunk relocated
	 * before the pause is expected, considered and completed too.
	 */
	ASSERT_EQ(0, resume(w->fs.fd, &r));
	EXPECT_EQ(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, r.flags);
	EXPECT_EQ(BTRFS_BALANCE_ARGS_CONVERT, r.data.flags);
	EXPECT_EQ(1 + left, r.stat.expected);
	EXPECT_EQ(1 + left, r.stat.completed);
	EXPECT_EQ((__u64)before.n, r.stat.considered);
	expect_all_data(_metadata, &w->fs, RAID1);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, cancel_stops_and_forgets_the_balance, 300)
{
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct chunk_list before, after;
	struct call *cancel;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	cancel = call_start(_metadata, w, do_balance_ctl, w->fs.fd,
			    BTRFS_BALANCE_CTL_CANCEL, NULL, NULL);
	ASSERT_EQ(0, wait_balance_state(w->fs.fd,
					BTRFS_BALANCE_STATE_CANCEL_REQ |
					BTRFS_BALANCE_STATE_RUNNING, HANG_MS));
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, call_join(cancel));
	ASSERT_EQ(-ECANCELED, balance_thread_join(&w->bt));
	EXPECT_EQ(0ULL, w->bt.args.state & BTRFS_BALANCE_STATE_RUNNING);
	EXPECT_EQ(1ULL, w->bt.args.stat.completed);
	expect_log(_metadata, &w->fs, "balance: canceled");
	expect_no_balance(_metadata, &w->fs);
	EXPECT_EQ(-ENOTCONN, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL));
	EXPECT_EQ(-ENOTCONN, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_PAUSE));
	ASSERT_EQ(0, read_chunks(w->fs.fd, &after));
	EXPECT_EQ(1, count_moved(&before, &after));
	EXPECT_EQ(count_type(&before, BTRFS_BLOCK_GROUP_DATA) - 1,
		  count_data_not(&after, RAID1));
	/* The exclusive operation is free again. */
	noop_request(&a);
	EXPECT_EQ(0, balance_v2(w->fs.fd, &a));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, exclusive_ops_are_refused_while_running, 300)
{
	struct btrfs_ioctl_balance_args a, again;
	struct world *w = &self->w;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	/* Arguments that would fail harmlessly if the call got through. */
	EXPECT_EQ(EXCL_BUSY, add_device(w->fs.fd, NO_SUCH_DEV));
	EXPECT_EQ(EXCL_BUSY, remove_devid(w->fs.fd, NO_SUCH_DEVID));
	EXPECT_EQ(EXCL_BUSY, resize(w->fs.fd, "999:max"));
	EXPECT_EQ(EXCL_BUSY, replace(w->fs.fd, NO_SUCH_DEVID, NO_SUCH_DEV));
	again = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fs.fd, &again));
	expect_exclop(_metadata, &w->fs, "balance");
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	EXPECT_EQ(w->fs.ndevs, fs_num_devices(w->fs.fd));
	expect_all_data(_metadata, &w->fs, RAID1);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, only_device_add_runs_beside_a_paused_balance, 300)
{
	const char *spare = self->w.fs.env.devs[variant->ndevs];
	struct btrfs_ioctl_balance_args a, p, r;
	struct world *w = &self->w;
	int ret;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	pause_held(_metadata, w);
	EXPECT_EQ(EXCL_BUSY, resize(w->fs.fd, "999:max"));
	EXPECT_EQ(EXCL_BUSY, remove_devid(w->fs.fd, NO_SUCH_DEVID));
	EXPECT_EQ(EXCL_BUSY, replace(w->fs.fd, NO_SUCH_DEVID, NO_SUCH_DEV));
	ret = add_device(w->fs.fd, spare);
	ASSERT_EQ(0, ret) TH_LOG("add %s beside a paused balance", spare);
	w->fs.ndevs++;
	EXPECT_EQ(w->fs.ndevs, fs_num_devices(w->fs.fd));
	/* Still paused, and still exclusive against the others. */
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	EXPECT_EQ(EXCL_BUSY, resize(w->fs.fd, "999:max"));
	ASSERT_EQ(0, resume(w->fs.fd, &r));
	expect_all_data(_metadata, &w->fs, RAID1);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

/*
 * A dry run of the convert the world's balance runs (soft: the chunks not
 * in the target yet) beside it: 0, the data chunks not in raid1 as its
 * estimate, and nothing moved.
 */
static void dry_run_beside(struct __test_metadata *_metadata, struct world *w)
{
	struct btrfs_ioctl_balance_args d;
	struct chunk_list before, after;
	int i;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	convert_request(&d, RAID1);
	d.data.flags |= BTRFS_BALANCE_ARGS_SOFT;
	d.flags |= BTRFS_BALANCE_DRY_RUN;
	ASSERT_EQ(0, balance_v2(w->fs.fd, &d));
	EXPECT_EQ(BTRFS_BALANCE_EXT_ESTIMATE, d.ext_flags);
	EXPECT_EQ((__u64)count_data_not(&before, RAID1),
		  d.types[BTRFS_BALANCE_DATA_INDEX].chunks_expected);
	EXPECT_LT(0ULL, d.types[BTRFS_BALANCE_DATA_INDEX].chunks_expected);
	EXPECT_EQ(0ULL, d.types[BTRFS_BALANCE_META_INDEX].chunks_expected);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &after));
	ASSERT_EQ(before.n, after.n);
	for (i = 0; i < before.n; i++)
		EXPECT_FALSE(chunk_moved(&before, i, &after));
}

/*
 * A dry run writes nothing: it looks beside a running balance (held
 * between two chunks), which goes on afterwards with the exclusive
 * operation it held.
 */
TEST_F_TIMEOUT(lifecycle, a_dry_run_looks_beside_a_running_balance, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	dry_run_beside(_metadata, w);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_NE(0ULL, p.state & BTRFS_BALANCE_STATE_RUNNING);
	expect_exclop(_metadata, &w->fs, "balance");
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	expect_all_data(_metadata, &w->fs, RAID1);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

/* The same beside a paused balance, which stays paused and resumes. */
TEST_F_TIMEOUT(lifecycle, a_dry_run_looks_beside_a_paused_balance, 300)
{
	struct btrfs_ioctl_balance_args a, p, r;
	struct world *w = &self->w;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	pause_held(_metadata, w);
	dry_run_beside(_metadata, w);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	ASSERT_EQ(0, resume(w->fs.fd, &r));
	expect_all_data(_metadata, &w->fs, RAID1);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, paused_balance_resumes_on_next_mount, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	struct chunk_list l;
	int ret;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	pause_held(_metadata, w);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l));
	ASSERT_LT(0, count_data_not(&l, RAID1));
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	world_umount(_metadata, &w->fs);
	world_mount(_metadata, &w->fs, w->fs.ndevs, 0, NULL);
	ret = wait_balance_gone(w->fs.fd, HANG_MS);
	ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end: %d", ret);
	expect_log(_metadata, &w->fs, "balance: resume -dconvert=raid1\n");
	expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, unmount_pauses_and_skip_balance_keeps_it_paused, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	struct call *um;

	/* A plain data balance. */
	data_request(&a);
	start_held(_metadata, w, &a);
	pause_held(_metadata, w);
	world_umount(_metadata, &w->fs);

	/* A read-write mount resumes it in a kernel thread, held here... */
	mount_resume_held(_metadata, w);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p.state);
	EXPECT_EQ(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, p.flags);
	/* ...which unmount pauses, keeping the item. */
	um = umount_waiting(_metadata, w);
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, call_join(um));
	w->fs.mounted = false;

	world_mount(_metadata, &w->fs, w->fs.ndevs, 0, "skip_balance");
	expect_log(_metadata, &w->fs, "balance: resume skipped");
	/* As stored: the args a resume adjusts are not written back. */
	expect_paused(_metadata, &w->fs,
		      BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME,
		      &p);
	EXPECT_EQ(0ULL, p.data.flags);

	/* Cancelling the paused balance deletes it, for good. */
	EXPECT_EQ(0, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL));
	expect_no_balance(_metadata, &w->fs);
	world_umount(_metadata, &w->fs);
	world_mount(_metadata, &w->fs, w->fs.ndevs, 0, NULL);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

/*
 * A remount read-only needs the mount's writers gone: while the ioctl
 * runs a balance it fails with -EBUSY.  A balance resumed at mount runs in
 * the btrfs-balance thread, which is no writer of the mount: a remount
 * read-only pauses it, and a remount read-write resumes it.
 */
TEST_F_TIMEOUT(lifecycle, remount_read_only_pauses_and_read_write_resumes, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	struct call *ro;
	int ret;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	EXPECT_EQ(-EBUSY, remount(w->fs.env.mnt, MS_RDONLY));
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p.state);
	pause_held(_metadata, w);
	world_umount(_metadata, &w->fs);

	mount_resume_held(_metadata, w);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p.state);
	ro = call_start(_metadata, w, do_remount, -1, MS_RDONLY, w->fs.env.mnt,
			NULL);
	ASSERT_EQ(0, wait_balance_state(w->fs.fd,
					BTRFS_BALANCE_STATE_PAUSE_REQ |
					BTRFS_BALANCE_STATE_RUNNING, HANG_MS));
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, call_join(ro));

	/* Read-only: paused, kept, and not to be canceled. */
	expect_log(_metadata, &w->fs, "balance: paused");
	expect_paused(_metadata, &w->fs,
		      BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME,
		      &p);
	EXPECT_EQ(0ULL, p.stat.completed);
	EXPECT_EQ(-EROFS, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL));
	expect_paused(_metadata, &w->fs,
		      BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME,
		      &p);
	verify_dataset(_metadata, w);

	/* Read-write again: the btrfs-balance thread resumes it. */
	kmsg_end(&w->fs.kmsg);
	ASSERT_EQ(0, kmsg_start(&w->fs.kmsg));
	ASSERT_EQ(0, remount(w->fs.env.mnt, 0));
	ret = wait_balance_gone(w->fs.fd, HANG_MS);
	ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end: %d", ret);
	expect_log(_metadata, &w->fs, "balance: resume -dconvert=raid1\n");
	expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, fatal_signal_cancels_the_balance, 300)
{
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct chunk_list l;
	int status;
	pid_t pid;

	convert_request(&a, RAID1);
	ASSERT_EQ(0, balance_hold_set(HOLD_RELOCATION));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(balance_v2(w->fs.fd, &a) == 0 ? 0 : 1);
	wait_held(_metadata, w, HOLD_RELOCATION);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	/* The hold lets a killed thread go; clear it all the same. */
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	expect_log(_metadata, &w->fs, "balance: canceled");
	expect_no_balance(_metadata, &w->fs);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l));
	EXPECT_LT(0, count_data_not(&l, RAID1));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, cancel_wins_over_a_racing_pause, 300)
{
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct chunk_list before, after;
	struct call *pause, *cancel;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	pause = call_start(_metadata, w, do_balance_ctl, w->fs.fd,
			   BTRFS_BALANCE_CTL_PAUSE, NULL, NULL);
	ASSERT_EQ(0, wait_balance_state(w->fs.fd, BTRFS_BALANCE_STATE_PAUSE_REQ,
					HANG_MS));
	cancel = call_start(_metadata, w, do_balance_ctl, w->fs.fd,
			    BTRFS_BALANCE_CTL_CANCEL, NULL, NULL);
	ASSERT_EQ(0, wait_balance_state(w->fs.fd,
					BTRFS_BALANCE_STATE_PAUSE_REQ |
					BTRFS_BALANCE_STATE_CANCEL_REQ,
					HANG_MS));
	/* Both are pending when the walk looks at them. */
	ASSERT_EQ(0, balance_hold_set(0));
	EXPECT_EQ(-ECANCELED, balance_thread_join(&w->bt));
	EXPECT_EQ(0, call_join(cancel));
	EXPECT_EQ(0, call_join(pause));
	EXPECT_EQ(0ULL, w->bt.args.stat.completed);
	expect_log(_metadata, &w->fs, "balance: canceled");
	EXPECT_EQ(0, kmsg_contains(&w->fs.kmsg, "balance: paused"));
	expect_no_balance(_metadata, &w->fs);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &after));
	EXPECT_EQ(0, count_moved(&before, &after));
	verify_dataset(_metadata, w);
}

/*
 * Leave a paused balance on disk, unmounted; the tests mount it with its
 * resume thread held (world_mount_held(), HOLD_RESUME_THREAD).
 */
static void paused_on_disk(struct __test_metadata *_metadata, struct world *w,
			   const struct btrfs_ioctl_balance_args *a)
{
	start_held(_metadata, w, a);
	pause_held(_metadata, w);
	world_umount(_metadata, &w->fs);
}

TEST_F_TIMEOUT(lifecycle, resume_in_the_mount_resume_window_is_einprogress, 300)
{
	struct btrfs_ioctl_balance_args a, p, r;
	struct world *w = &self->w;
	int ret;

	convert_request(&a, RAID1);
	paused_on_disk(_metadata, w, &a);
	world_mount_held(_metadata, &w->fs, w->fs.ndevs, 0, NULL,
			 HOLD_RESUME_THREAD);
	wait_held(_metadata, w, HOLD_RESUME_THREAD);
	/* The resume thread has not started the balance: it runs already. */
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p.state);
	EXPECT_EQ(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, p.flags);
	expect_exclop(_metadata, &w->fs, "balance");
	EXPECT_EQ(-EINPROGRESS, resume(w->fs.fd, &r));
	r = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fs.fd, &r));
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p.state);
	EXPECT_EQ(1, balance_item_present(w->fs.fd));

	ASSERT_EQ(0, balance_hold_set(0));
	ret = wait_balance_gone(w->fs.fd, HANG_MS);
	ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end: %d", ret);
	expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(lifecycle, unmount_in_the_mount_resume_window_keeps_it_paused,
	       300)
{
	struct btrfs_ioctl_balance_args a, p, r;
	struct world *w = &self->w;
	struct call *um;

	convert_request(&a, RAID1);
	paused_on_disk(_metadata, w, &a);
	world_mount_held(_metadata, &w->fs, w->fs.ndevs, 0, NULL,
			 HOLD_RESUME_THREAD);
	wait_held(_metadata, w, HOLD_RESUME_THREAD);
	/*
	 * The unmount cannot end while the resume thread is held: it waits
	 * for the balance to stop running.
	 */
	um = umount_waiting(_metadata, w);
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, call_join(um));
	w->fs.mounted = false;
	expect_log(_metadata, &w->fs,
		   "balance: not resumed (-22), it stays paused");

	world_mount(_metadata, &w->fs, w->fs.ndevs, 0, "skip_balance");
	expect_paused(_metadata, &w->fs,
		      BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME,
		      &p);
	EXPECT_EQ(BTRFS_BALANCE_ARGS_CONVERT, p.data.flags);
	EXPECT_EQ(RAID1, p.data.target);
	ASSERT_EQ(0, resume(w->fs.fd, &r));
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
}

/*
 * A device add holds the exclusive operation from before it reads its
 * arguments: with them on a userfaultfd page, it stops there, inside
 * memdup_user(), for as long as the test needs.
 */
TEST_F_TIMEOUT(lifecycle, resume_and_cancel_are_ebusy_while_a_device_add_runs,
	       300)
{
	const char *spare = self->w.fs.env.devs[variant->ndevs];
	struct btrfs_ioctl_balance_args a, p, r;
	long page = sysconf(_SC_PAGESIZE);
	struct world *w = &self->w;
	struct uffd_msg msg;
	struct call *add;
	void *map;

	ASSERT_GE((size_t)page, sizeof(struct btrfs_ioctl_vol_args));
	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	pause_held(_metadata, w);
	map = uffd_page(_metadata, &w->fs);
	add = call_start(_metadata, w, do_add_dev, w->fs.fd, 0, NULL, map);
	uffd_wait(_metadata, &w->fs, &msg,
		  "the device add never read its arguments");
	ASSERT_EQ((unsigned long)map,
		  msg.arg.pagefault.address & ~((__u64)page - 1));
	EXPECT_FALSE(call_done(add));
	expect_exclop(_metadata, &w->fs, "device add");

	/* The paused balance is there, but not to be taken now. */
	EXPECT_EQ(-EBUSY, resume(w->fs.fd, &r));
	expect_log(_metadata, &w->fs,
		   "balance: cannot resume while another operation runs beside the paused balance");
	EXPECT_EQ(-EBUSY, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL));
	expect_log(_metadata, &w->fs,
		   "balance: cannot cancel while another operation runs beside the paused balance");
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(0ULL, p.state);
	EXPECT_EQ(1, balance_item_present(w->fs.fd));
	expect_exclop(_metadata, &w->fs, "device add");

	/* The arguments arrive: the spare is added. */
	uffd_give_dev_args(_metadata, &w->fs, map, spare);
	ASSERT_EQ(0, call_join(add)) TH_LOG("add %s", spare);
	w->fs.ndevs++;
	EXPECT_EQ(w->fs.ndevs, fs_num_devices(w->fs.fd));
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);

	ASSERT_EQ(0, resume(w->fs.fd, &r));
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
}

/* ---- Progress in bytes, time and the chunk being relocated ---- */

#define DATA_INDEX	0	/* of types[] */

/* Progress of a balance that only touches data: the other types are 0. */
static void expect_only_data(struct __test_metadata *_metadata,
			     const struct btrfs_ioctl_balance_args *p)
{
	static const struct btrfs_balance_type_progress zero;

	EXPECT_EQ(BTRFS_BALANCE_EXT_PROGRESS, p->ext_flags);
	EXPECT_EQ(0, memcmp(&p->types[1], &zero, sizeof(zero)));
	EXPECT_EQ(0, memcmp(&p->types[2], &zero, sizeof(zero)));
}

/*
 * The data chunks a convert relocates, counted with the bytes their block
 * groups use; one step relocates one of them, and the balance ends with
 * what it expected.  It started between the calls around its start.
 */
TEST_F_TIMEOUT(lifecycle, progress_counts_the_bytes_of_each_type, 300)
{
	const struct btrfs_balance_type_progress *d;
	struct btrfs_ioctl_balance_args a, p0, p1;
	struct chunk_list before, after;
	struct world *w = &self->w;
	__u64 used, moved_used = 0, t0, t1, wall0, wall;
	int i, moved = 0;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	used = used_of_type(&before, BTRFS_BLOCK_GROUP_DATA);
	ASSERT_LT(0ULL, used);
	convert_request(&a, RAID1);
	t0 = time(NULL);
	wall0 = now_ms();
	start_held(_metadata, w, &a);
	t1 = time(NULL);

	ASSERT_EQ(0, balance_progress(w->fs.fd, &p0));
	expect_only_data(_metadata, &p0);
	d = &p0.types[DATA_INDEX];
	EXPECT_EQ((__u64)count_type(&before, BTRFS_BLOCK_GROUP_DATA),
		  d->chunks_expected);
	EXPECT_EQ(used, d->bytes_expected);
	EXPECT_EQ(0ULL, d->chunks_done);
	EXPECT_EQ(0ULL, d->bytes_done);
	EXPECT_LE(t0, p0.start_time);
	EXPECT_GE(t1, p0.start_time);
	/* Held before a chunk: none is being relocated. */
	EXPECT_EQ(0ULL, p0.current_type);
	EXPECT_EQ(0ULL, p0.current_start);

	hold_step(_metadata, w);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p1));
	ASSERT_EQ(0, read_chunks(w->fs.fd, &after));
	for (i = 0; i < before.n; i++) {
		if (find_chunk(&after, before.c[i].start) < 0) {
			moved++;
			moved_used += before.c[i].used;
		}
	}
	EXPECT_EQ(1, moved);
	d = &p1.types[DATA_INDEX];
	EXPECT_EQ(1ULL, d->chunks_done);
	EXPECT_EQ(moved_used, d->bytes_done);
	EXPECT_EQ(used, d->bytes_expected);
	EXPECT_EQ(p0.start_time, p1.start_time);

	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	wall = now_ms() - wall0;
	expect_only_data(_metadata, &w->bt.args);
	d = &w->bt.args.types[DATA_INDEX];
	EXPECT_EQ(d->chunks_expected, d->chunks_done);
	EXPECT_EQ(w->bt.args.stat.completed, d->chunks_done);
	EXPECT_EQ(used, d->bytes_done);
	/* It ran, and no longer than the test waited for it. */
	EXPECT_LT(0ULL, w->bt.args.run_time_ms);
	EXPECT_GE(wall, w->bt.args.run_time_ms);
	EXPECT_EQ(0ULL, w->bt.args.current_type);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

/* The running time stands still while the balance is paused. */
TEST_F_TIMEOUT(lifecycle, run_time_leaves_out_a_pause, 300)
{
	struct btrfs_ioctl_balance_args a, p1, p2, r;
	struct world *w = &self->w;
	__u64 wall0, wall;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	pause_held(_metadata, w);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p1);
	EXPECT_EQ(BTRFS_BALANCE_EXT_PROGRESS, p1.ext_flags);
	EXPECT_EQ(1ULL, p1.types[DATA_INDEX].chunks_done);

	usleep(1200 * 1000);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p2);
	EXPECT_EQ(p1.run_time_ms, p2.run_time_ms);
	EXPECT_EQ(p1.start_time, p2.start_time);

	/* The resume adds its own run, no more than it took. */
	wall0 = now_ms();
	ASSERT_EQ(0, resume(w->fs.fd, &r));
	wall = now_ms() - wall0;
	EXPECT_EQ(p1.start_time, r.start_time);
	EXPECT_LE(p1.run_time_ms, r.run_time_ms);
	EXPECT_GE(p1.run_time_ms + wall, r.run_time_ms);
	EXPECT_EQ(r.types[DATA_INDEX].chunks_expected,
		  r.types[DATA_INDEX].chunks_done);
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

/*
 * Inside the relocation of a block group, the progress names it; the
 * highest chunk, data, is the first a full balance relocates.
 */
TEST_F_TIMEOUT(lifecycle, progress_names_the_chunk_being_relocated, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct chunk_list before;
	struct world *w = &self->w;
	const struct chunk *top;
	char text[4096];

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	top = &before.c[before.n - 1];
	ASSERT_NE(0ULL, top->type & BTRFS_BLOCK_GROUP_DATA);
	full_request(&a);
	ASSERT_EQ(0, balance_hold_set(HOLD_IN_RELOCATION));
	ASSERT_EQ(0, balance_thread_start(&w->bt, w->fs.fd, &a));
	wait_held(_metadata, w, HOLD_IN_RELOCATION);

	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ(top->start, p.current_start);
	EXPECT_EQ(top->length, p.current_length);
	EXPECT_EQ(top->type, p.current_type);
	EXPECT_EQ(top->used, p.current_used);
	ASSERT_EQ(0, fs_sysfs_text(w->fs.fd, "balance_progress", text,
				   sizeof(text)));
	EXPECT_EQ(top->start, text_u64(text, "current_start"));
	EXPECT_EQ(top->used, text_u64(text, "current_used"));
	EXPECT_NE(NULL, strstr(text, "\ncurrent_type data\n"));
	EXPECT_NE(NULL, strstr(text, "\ncurrent_profile single\n"));

	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	EXPECT_EQ(0ULL, w->bt.args.current_type);
}

/* The sysfs file against the ioctl, with each field read by name. */
static void expect_sysfs_matches(struct __test_metadata *_metadata,
				 const char *text,
				 const struct btrfs_ioctl_balance_args *p)
{
	static const char * const names[] = { "data", "metadata", "system" };
	const struct btrfs_balance_type_progress *t;
	char key[64];
	int i;

	EXPECT_EQ(p->start_time, text_u64(text, "start_time"));
	EXPECT_EQ(p->stat.expected, text_u64(text, "chunks_expected"));
	EXPECT_EQ(p->stat.considered, text_u64(text, "chunks_considered"));
	EXPECT_EQ(p->stat.completed, text_u64(text, "chunks_done"));
	for (i = 0; i < 3; i++) {
		t = &p->types[i];
		snprintf(key, sizeof(key), "%s_chunks_expected", names[i]);
		EXPECT_EQ(t->chunks_expected, text_u64(text, key));
		snprintf(key, sizeof(key), "%s_chunks_done", names[i]);
		EXPECT_EQ(t->chunks_done, text_u64(text, key));
		snprintf(key, sizeof(key), "%s_bytes_expected", names[i]);
		EXPECT_EQ(t->bytes_expected, text_u64(text, key));
		snprintf(key, sizeof(key), "%s_bytes_done", names[i]);
		EXPECT_EQ(t->bytes_done, text_u64(text, key));
	}
}

/* Read as a user without privileges: 0, or why not; the ioctl: errno. */
static int read_unprivileged(int fd, char *text, size_t size,
			     int *ioctl_errno)
{
	struct btrfs_ioctl_balance_args p;
	int pipefd[2], status, ret;
	ssize_t n;
	pid_t pid;

	if (pipe(pipefd))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		int err = 0;

		close(pipefd[0]);
		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(2);
		ret = fs_sysfs_text(fd, "balance_progress", text, size);
		if (ret)
			_exit(3);
		if (ioctl(fd, BTRFS_IOC_BALANCE_PROGRESS, &p) < 0)
			err = errno;
		if (write(pipefd[1], &err, sizeof(err)) != sizeof(err) ||
		    write(pipefd[1], text, strlen(text) + 1) < 0)
			_exit(4);
		_exit(0);
	}
	close(pipefd[1]);
	n = read(pipefd[0], ioctl_errno, sizeof(*ioctl_errno));
	ret = n == sizeof(*ioctl_errno) ? 0 : -EIO;
	n = read(pipefd[0], text, size - 1);
	text[n > 0 ? n : 0] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return -WEXITSTATUS(status) ?: -EIO;
	return ret;
}

/*
 * balance_progress in sysfs: the figures of the progress ioctl, for all
 * to read as exclusive_operation is, not for writing; state none without
 * a balance.
 */
TEST_F_TIMEOUT(lifecycle, sysfs_shows_the_progress_to_all, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	char text[4096];
	struct stat st;
	int sfd, err;

	ASSERT_EQ(0, fs_sysfs_text(w->fs.fd, "balance_progress", text,
				   sizeof(text)));
	EXPECT_TRUE(!strncmp(text, "state none\n", 11)) TH_LOG("%s", text);
	EXPECT_EQ(0ULL, text_u64(text, "data_bytes_expected"));
	sfd = fs_sysfs_open(w->fs.fd, "balance_progress", O_RDONLY);
	ASSERT_LE(0, sfd);
	ASSERT_EQ(0, fstat(sfd, &st));
	close(sfd);
	EXPECT_EQ(0444U, st.st_mode & 07777);
	EXPECT_EQ(-EACCES, fs_sysfs_open(w->fs.fd, "balance_progress",
					 O_WRONLY));

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	ASSERT_EQ(0, fs_sysfs_text(w->fs.fd, "balance_progress", text,
				   sizeof(text)));
	EXPECT_TRUE(!strncmp(text, "state running\n", 14)) TH_LOG("%s", text);
	expect_sysfs_matches(_metadata, text, &p);
	EXPECT_LE(p.run_time_ms, text_u64(text, "run_time_ms"));

	/* A user without privileges reads the file, not the ioctl. */
	ASSERT_EQ(0, read_unprivileged(w->fs.fd, text, sizeof(text), &err));
	EXPECT_EQ(EPERM, err);
	expect_sysfs_matches(_metadata, text, &p);

	pause_held(_metadata, w);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	ASSERT_EQ(0, fs_sysfs_text(w->fs.fd, "balance_progress", text,
				   sizeof(text)));
	EXPECT_TRUE(!strncmp(text, "state paused\n", 13)) TH_LOG("%s", text);
	expect_sysfs_matches(_metadata, text, &p);
	EXPECT_EQ(p.run_time_ms, text_u64(text, "run_time_ms"));

	ASSERT_EQ(0, balance_ctl(w->fs.fd, BTRFS_BALANCE_CTL_CANCEL));
	ASSERT_EQ(0, fs_sysfs_text(w->fs.fd, "balance_progress", text,
				   sizeof(text)));
	EXPECT_TRUE(!strncmp(text, "state none\n", 11)) TH_LOG("%s", text);
}

/*
 * What the caller leaves in the output fields of a start does not reach
 * the balance: the progress is the kernel's own.
 */
TEST_F_TIMEOUT(lifecycle, output_fields_of_a_request_are_ignored, 300)
{
	struct btrfs_ioctl_balance_args a, p;
	struct chunk_list before;
	struct world *w = &self->w;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	convert_request(&a, RAID1);
	a.ext_flags = ~0ULL;
	memset(a.types, 0xff, sizeof(a.types));
	a.start_time = ~0ULL;
	a.run_time_ms = ~0ULL;
	a.current_start = a.current_length = ~0ULL;
	a.current_type = a.current_used = ~0ULL;
	start_held(_metadata, w, &a);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	expect_only_data(_metadata, &p);
	EXPECT_EQ((__u64)count_type(&before, BTRFS_BLOCK_GROUP_DATA),
		  p.types[DATA_INDEX].chunks_expected);
	EXPECT_EQ(used_of_type(&before, BTRFS_BLOCK_GROUP_DATA),
		  p.types[DATA_INDEX].bytes_expected);
	EXPECT_EQ(0ULL, p.types[DATA_INDEX].chunks_done);
	EXPECT_GT((__u64)time(NULL) + 1, p.start_time);
	EXPECT_GT(3600ULL * 1000, p.run_time_ms);
	EXPECT_EQ(0ULL, p.current_type);
	ASSERT_EQ(0, balance_hold_set(0));
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	expect_no_balance(_metadata, &w->fs);
}

/*
 * ---- A balance paused and resumed, by the ioctl or at mount: one device,
 * six data chunks ----
 */

FIXTURE(resume) {
	struct world w;
};

FIXTURE_VARIANT(resume) {
	bool by_mount;		/* resumed at mount, else by the ioctl */
};

FIXTURE_VARIANT_ADD(resume, by_ioctl) {
	.by_mount = false,
};

FIXTURE_VARIANT_ADD(resume, at_mount) {
	.by_mount = true,
};

FIXTURE_SETUP(resume)
{
	if (!world_setup(_metadata, &self->w.fs, 1, 1, "single", "dup", "512M",
			 0))
		return;
	make_dataset(_metadata, &self->w, 6);
}

FIXTURE_TEARDOWN(resume)
{
	world_teardown(_metadata, &self->w);
}

#define LIMIT	2

/*
 * limit=2, paused after 1 chunk: the resumed balance takes 1 more, 2 in
 * all, where counting afresh would take 3 (6 chunks match).  The limit in
 * the args stays 2: the chunks taken are kept beside it.
 */
TEST_F_TIMEOUT(resume, limit_counts_the_chunks_taken_before_a_pause, 300)
{
	struct btrfs_ioctl_balance_args a, p, r;
	struct chunk_list l0, l1, l2;
	struct world *w = &self->w;
	int ret;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &l0));
	ASSERT_LT(LIMIT + 1, count_type(&l0, BTRFS_BLOCK_GROUP_DATA));
	data_request(&a);
	a.data.flags = BTRFS_BALANCE_ARGS_LIMIT;
	a.data.limit = LIMIT;
	start_held(_metadata, w, &a);
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	EXPECT_EQ((__u64)LIMIT, p.stat.expected);
	hold_step(_metadata, w);
	pause_held(_metadata, w);

	/* One chunk taken; the limit reads as given. */
	EXPECT_EQ(1ULL, w->bt.args.stat.completed);
	EXPECT_EQ(BTRFS_BALANCE_ARGS_LIMIT, w->bt.args.data.flags);
	EXPECT_EQ((__u64)LIMIT, w->bt.args.data.limit);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l1));
	EXPECT_EQ(1, count_moved(&l0, &l1));
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p);
	EXPECT_EQ((__u64)LIMIT, p.data.limit);

	/* The counters are the whole balance's, from before the pause on. */
	if (!variant->by_mount) {
		ASSERT_EQ(0, resume(w->fs.fd, &r));
		EXPECT_EQ(BTRFS_BALANCE_ARGS_LIMIT, r.data.flags);
		EXPECT_EQ((__u64)LIMIT, r.data.limit);
		EXPECT_EQ((__u64)LIMIT, r.stat.expected);
		EXPECT_EQ((__u64)LIMIT, r.stat.completed);
	} else {
		/* The limit and the chunks taken come from the item. */
		world_umount(_metadata, &w->fs);
		mount_resume_held(_metadata, w);
		ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
		EXPECT_EQ(BTRFS_BALANCE_STATE_RUNNING, p.state);
		EXPECT_EQ(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, p.flags);
		EXPECT_EQ(BTRFS_BALANCE_ARGS_LIMIT, p.data.flags);
		EXPECT_EQ((__u64)LIMIT, p.data.limit);
		EXPECT_EQ((__u64)LIMIT, p.stat.expected);
		EXPECT_EQ(1ULL, p.stat.completed);
		ASSERT_EQ(0, balance_hold_set(0));
		ret = wait_balance_gone(w->fs.fd, HANG_MS);
		ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end");
		expect_log(_metadata, &w->fs, "balance: resume -dlimit=2\n");
	}
	expect_no_balance(_metadata, &w->fs);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &l2));
	EXPECT_EQ(LIMIT - 1, count_moved(&l1, &l2));
	EXPECT_EQ(LIMIT, count_moved(&l0, &l1) + count_moved(&l1, &l2));
	verify_dataset(_metadata, w);
}

/* Bytes used in the data chunks of @l that are in @before too. */
static __u64 used_of_old_data(const struct chunk_list *before,
			      const struct chunk_list *l)
{
	__u64 used = 0;
	int i;

	for (i = 0; i < l->n; i++)
		if ((l->c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
		    find_chunk(before, l->c[i].start) >= 0)
			used += l->c[i].used;
	return used;
}

/*
 * Paused after one chunk and resumed: without a remount the progress
 * describes the whole balance.  The extents of the relocated chunk may
 * have gone into the free space of a chunk still to do, which then uses
 * more than it did: the resume counts what the chunks left use now, and
 * the bytes relocated end above what the chunks used at first.  After a
 * remount only the chunk counts (stat) cover the whole balance: the item
 * keeps the count of relocated chunks, not the per-type figures or the
 * times, which count from the mount.
 */
TEST_F_TIMEOUT(resume, progress_describes_the_whole_balance, 300)
{
	struct btrfs_ioctl_balance_args a, p1, p;
	const struct btrfs_balance_type_progress *d;
	struct balance_item_state item;
	struct chunk_list before, paused;
	struct world *w = &self->w;
	__u64 used, ndata, left;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	used = used_of_type(&before, BTRFS_BLOCK_GROUP_DATA);
	ndata = count_type(&before, BTRFS_BLOCK_GROUP_DATA);
	data_request(&a);
	start_held(_metadata, w, &a);
	hold_step(_metadata, w);
	pause_held(_metadata, w);
	expect_paused(_metadata, &w->fs, BTRFS_BALANCE_DATA, &p1);
	ASSERT_EQ(1ULL, p1.types[DATA_INDEX].chunks_done);
	ASSERT_LT(0ULL, p1.types[DATA_INDEX].bytes_done);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &paused));
	left = used_of_old_data(&before, &paused);
	/* The item's counts are stamped with the chunks below its bound. */
	ASSERT_EQ(0, balance_item_read(w->fs.fd, &item));
	EXPECT_EQ(1ULL, item.completed);
	EXPECT_EQ(count_below(&paused, item.bound), item.chunks_below_bound);
	EXPECT_EQ(count_below(&before, item.bound) - 1,
		  item.chunks_below_bound);

	if (variant->by_mount) {
		/*
		 * From the item alone: the chunks relocated, exactly; no
		 * per-type figures, no times.
		 */
		world_umount(_metadata, &w->fs);
		world_mount(_metadata, &w->fs, w->fs.ndevs, 0, "skip_balance");
		expect_paused(_metadata, &w->fs,
			      BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, &p);
		d = &p.types[DATA_INDEX];
		EXPECT_EQ(1ULL, p.stat.completed);
		EXPECT_EQ(0ULL, d->chunks_done);
		EXPECT_EQ(0ULL, d->bytes_done);
		EXPECT_EQ(0ULL, p.start_time);
		EXPECT_EQ(0ULL, p.run_time_ms);
		world_umount(_metadata, &w->fs);
		mount_resume_held(_metadata, w);
	} else {
		memset(&a, 0, sizeof(a));
		a.flags = BTRFS_BALANCE_RESUME;
		start_held(_metadata, w, &a);
	}
	ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
	d = &p.types[DATA_INDEX];
	EXPECT_EQ(BTRFS_BALANCE_EXT_PROGRESS, p.ext_flags);
	EXPECT_EQ(1ULL, p.stat.completed);
	if (variant->by_mount) {
		/* Per type: what is left, from the mount on. */
		EXPECT_EQ(ndata - 1, d->chunks_expected);
		EXPECT_EQ(left, d->bytes_expected);
		EXPECT_EQ(0ULL, d->chunks_done);
		EXPECT_EQ(0ULL, d->bytes_done);
		EXPECT_EQ(0ULL, p.start_time);
	} else {
		/* Counted again: what is left, plus what was done before. */
		EXPECT_EQ(ndata, d->chunks_expected);
		EXPECT_EQ(p1.types[DATA_INDEX].bytes_done + left,
			  d->bytes_expected);
		EXPECT_EQ(1ULL, d->chunks_done);
		EXPECT_EQ(p1.types[DATA_INDEX].bytes_done, d->bytes_done);
		EXPECT_EQ(p1.start_time, p.start_time);
		EXPECT_LE(p1.run_time_ms, p.run_time_ms);
	}

	ASSERT_EQ(0, balance_hold_set(0));
	if (variant->by_mount) {
		ASSERT_EQ(0, wait_balance_gone(w->fs.fd, HANG_MS))
			TH_LOG("the resumed balance did not end");
	} else {
		ASSERT_EQ(0, balance_thread_join(&w->bt));
		d = &w->bt.args.types[DATA_INDEX];
		EXPECT_EQ(ndata, d->chunks_done);
		EXPECT_LE(used, d->bytes_done);
		EXPECT_EQ(d->bytes_expected, d->bytes_done);
		EXPECT_EQ(ndata, w->bt.args.stat.completed);
	}
	expect_no_balance(_metadata, &w->fs);
	verify_dataset(_metadata, w);
}

/* ---- A resume that fails its checks: raid1 on two devices, degraded ---- */

FIXTURE(degraded) {
	struct world w;
};

FIXTURE_SETUP(degraded)
{
	if (!world_setup(_metadata, &self->w.fs, 2, 2, "raid1", "raid1", "384M",
			 0))
		return;
	make_dataset(_metadata, &self->w, 2);
}

FIXTURE_TEARDOWN(degraded)
{
	world_teardown(_metadata, &self->w);
}

/* A resume of the raid1 convert failed its checks: it stays paused. */
static void expect_raid1_resume_refused(struct __test_metadata *_metadata,
					struct world *w)
{
	struct btrfs_ioctl_balance_args p;

	expect_log(_metadata, &w->fs,
		   "balance: invalid convert data profile raid1");
	expect_log(_metadata, &w->fs,
		   "balance: not resumed (-22), it stays paused");
	expect_paused(_metadata, &w->fs,
		      BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, &p);
}

/*
 * A convert to raid1, paused; mounted degraded, with one device of two,
 * raid1 cannot be resumed: the resume at mount, then the ioctl's with
 * skip_balance, fail their checks and the balance stays paused.  With both
 * devices back it resumes at mount and ends.
 */
TEST_F_TIMEOUT(degraded, resume_failing_its_checks_keeps_the_balance_paused,
	       300)
{
	char *forget[6] = {
		"btrfs", "device", "scan", "--forget", self->w.fs.env.devs[1],
		NULL,
	};
	char *scrub[6] = {
		"btrfs", "scrub", "start", "-B", self->w.fs.env.mnt, NULL,
	};
	struct btrfs_ioctl_balance_args a, r;
	struct world *w = &self->w;
	int ret;

	convert_request(&a, RAID1);
	start_held(_metadata, w, &a);
	pause_held(_metadata, w);
	world_umount(_metadata, &w->fs);
	ASSERT_EQ(0, run_cmd(forget));

	/* Mount-time resume: it gives up, or forgets the balance. */
	world_mount(_metadata, &w->fs, 1, 0, "degraded");
	wait_resume_given_up(_metadata, w);
	expect_raid1_resume_refused(_metadata, w);
	world_umount(_metadata, &w->fs);

	/* Resume by the ioctl. */
	kmsg_end(&w->fs.kmsg);
	ASSERT_EQ(0, kmsg_start(&w->fs.kmsg));
	world_mount(_metadata, &w->fs, 1, 0, "degraded,skip_balance");
	expect_log(_metadata, &w->fs, "balance: resume skipped");
	EXPECT_EQ(-EINVAL, resume(w->fs.fd, &r));
	expect_raid1_resume_refused(_metadata, w);
	verify_dataset(_metadata, w);
	world_umount(_metadata, &w->fs);

	/* Both devices: resumed at mount, and done. */
	kmsg_end(&w->fs.kmsg);
	ASSERT_EQ(0, kmsg_start(&w->fs.kmsg));
	world_mount(_metadata, &w->fs, 2, 0, NULL);
	ret = wait_balance_gone(w->fs.fd, HANG_MS);
	ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end: %d", ret);
	expect_log(_metadata, &w->fs, "balance: resume -dconvert=raid1\n");
	expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	expect_no_balance(_metadata, &w->fs);
	expect_all_data(_metadata, &w->fs, RAID1);
	verify_dataset(_metadata, w);
	/*
	 * What the degraded mounts wrote has one copy: the scrub writes the
	 * second one, and finds every error it meets correctable.
	 */
	EXPECT_EQ(0, run_cmd(scrub));
}

/*
 * A full balance paused at half way, after K of its N chunks, then
 * resumed: by the ioctl, or at mount after an unmount.  The resume walks
 * only the chunks below the bound the item recorded, with the args the
 * balance started with, so it relocates the N - K chunks left, once each,
 * and never one of the copies; its counters are the whole balance's.  (A
 * resume that guessed with usage=90, as older kernels do, relocates the
 * copies again, here all of them.)
 */
TEST_F_TIMEOUT(resume, a_paused_full_balance_relocates_each_chunk_once, 300)
{
	struct btrfs_ioctl_balance_args a, p, r;
	struct balance_item_state item;
	struct world *w = &self->w;
	struct chunk_list before;
	__u64 n, k, bound;
	int ret;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	n = before.n;
	k = n / 2;
	bound = chunks_end(&before);
	ASSERT_LE(4ULL, n);

	full_request(&a);
	ASSERT_EQ(0, balance_hold_skip_set(k));
	start_held(_metadata, w, &a);
	pause_held(_metadata, w);
	EXPECT_EQ(k, w->bt.args.stat.completed);
	EXPECT_EQ(n, w->bt.args.stat.expected);
	ASSERT_EQ(0, balance_item_read(w->fs.fd, &item));
	EXPECT_EQ(bound, item.bound);
	EXPECT_EQ(k, item.completed);
	verify_dataset(_metadata, w);

	if (!variant->by_mount) {
		ASSERT_EQ(0, resume(w->fs.fd, &r));
		EXPECT_EQ(n, r.stat.expected);
		EXPECT_EQ(n, r.stat.considered);
		EXPECT_EQ(n, r.stat.completed);
		EXPECT_EQ(0ULL, r.data.flags);
		EXPECT_EQ(0ULL, r.meta.flags);
	} else {
		world_umount(_metadata, &w->fs);
		mount_resume_held(_metadata, w);
		/* Counted what is left, on top of the chunks done before. */
		ASSERT_EQ(0, balance_progress(w->fs.fd, &p));
		EXPECT_EQ(n, p.stat.expected);
		EXPECT_EQ(k, p.stat.considered);
		EXPECT_EQ(k, p.stat.completed);
		EXPECT_EQ(0ULL, p.data.flags);
		ASSERT_EQ(0, balance_hold_set(0));
		ret = wait_balance_gone(w->fs.fd, HANG_MS);
		ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end");
		expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	}
	EXPECT_EQ(0, kmsg_contains(&w->fs.kmsg, "usage=90"));
	expect_no_balance(_metadata, &w->fs);
	expect_each_relocated_once(_metadata, &w->fs, &before, bound, -1);
	expect_none_below(_metadata, &w->fs, bound);
	verify_dataset(_metadata, w);
}

/*
 * A pause that comes while a block group is being relocated stops that
 * relocation: the block group stays where it is, unrelocated, and the
 * balance is paused with nothing completed.  The resume (by the ioctl, or
 * at mount) relocates it from the start.  (Older kernels finish the block
 * group first.)
 */
TEST_F_TIMEOUT(resume, a_pause_stops_inside_a_block_group, 300)
{
	struct btrfs_ioctl_balance_args a, r;
	struct balance_item_state item;
	struct chunk_list before, paused;
	struct world *w = &self->w;
	__u64 bound;

	ASSERT_EQ(0, read_chunks(w->fs.fd, &before));
	bound = chunks_end(&before);
	full_request(&a);
	ASSERT_EQ(0, balance_hold_set(HOLD_IN_RELOCATION));
	ASSERT_EQ(0, balance_thread_start(&w->bt, w->fs.fd, &a));
	/* The highest chunk, data, has its extent found: it is under way. */
	wait_held(_metadata, w, HOLD_IN_RELOCATION);
	pause_held(_metadata, w);
	expect_log(_metadata, &w->fs, "balance: paused");
	EXPECT_EQ(0ULL, w->bt.args.stat.completed);
	ASSERT_EQ(0, read_chunks(w->fs.fd, &paused));
	EXPECT_EQ(0, count_moved(&before, &paused));
	EXPECT_LE(0, find_chunk(&paused, before.c[before.n - 1].start));
	ASSERT_EQ(0, balance_item_read(w->fs.fd, &item));
	EXPECT_EQ(0ULL, item.completed);
	verify_dataset(_metadata, w);

	if (!variant->by_mount) {
		ASSERT_EQ(0, resume(w->fs.fd, &r));
		EXPECT_EQ((__u64)before.n, r.stat.completed);
	} else {
		world_umount(_metadata, &w->fs);
		world_mount(_metadata, &w->fs, w->fs.ndevs, 0, NULL);
		ASSERT_EQ(0, wait_balance_gone(w->fs.fd, HANG_MS))
			TH_LOG("the resumed balance did not end");
		expect_log(_metadata, &w->fs, "balance: ended with status: 0");
	}
	expect_no_balance(_metadata, &w->fs);
	expect_each_relocated_once(_metadata, &w->fs, &before, bound,
				   before.n - 1);
	expect_none_below(_metadata, &w->fs, bound);
	verify_dataset(_metadata, w);
}

TEST_HARNESS_MAIN
