/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A world for the harness tests of the balance lifecycle (lifecycle_test.c,
 * concurrency_test.c): a fresh filesystem for each test, whose data chunks
 * each hold one file of known content, with the helpers that set it up,
 * mount it, check it and tear it down, and the checks and requests these
 * tests share.
 *
 * Include it after btrfs_util.h and kselftest_harness.h, once the program
 * has defined HANG_MS (a wait that only a hang reaches, in ms).  A program's
 * world holds a struct fs_world, the part these helpers use.
 *
 * A teardown is world_teardown_begin(), then what stops the program's own
 * threads and calls, then world_teardown_end().
 */
#ifndef BTRFS_WORLD_H
#define BTRFS_WORLD_H

#include <poll.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>

#define DATA_FILE_SIZE	SZ_1M	/* the file each data chunk of the setup holds */
#define MAX_DATA_FILES	16

/* The filesystem of a test, and what its helpers below keep. */
struct fs_world {
	struct test_env env;
	int ndevs;		/* btrfs check scans devices 0..ndevs-1 */
	int fd;			/* the mount point, open; -1: closed */
	bool mounted;
	struct kmsg kmsg;	/* the kernel log since the setup */
	int uffd;		/* a userfaultfd of the test, or -1 */
	int nfiles;		/* files f00.. of make_data_chunks() */
};

/* ---- Threads of this process ---- */

/*
 * The kernel stack of thread @task of this process into @buf, or its wchan
 * where there is no stack file; "" when neither can be read.
 */
static inline void task_stack(pid_t task, char *buf, size_t size)
{
	static const char * const files[] = { "stack", "wchan" };
	char path[64];
	unsigned int i;
	ssize_t n;
	int fd;

	buf[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "/proc/self/task/%d/%s", task,
			 files[i]);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, size - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		return;
	}
	buf[0] = '\0';
}

/* Does thread @task of this process sleep in kernel function @fn? */
static inline bool task_waits_in(pid_t task, const char *fn)
{
	char buf[4096];

	task_stack(task, buf, sizeof(buf));
	return !!strstr(buf, fn);
}

/* ---- The world: set up, mounted, torn down ---- */

static inline int make_fs_sized(const struct test_env *env, int ndevs,
				const char *data, const char *meta,
				const char *size)
{
	char *argv[11 + MAX_DEVS] = {
		"mkfs.btrfs", "-f", "-q", "-K", "-d", (char *)data,
		"-m", (char *)meta,
	};
	int i, n = 8;

	if (size) {
		argv[n++] = "-b";
		argv[n++] = (char *)size;
	}
	for (i = 0; i < ndevs; i++)
		argv[n++] = (char *)env->devs[i];
	argv[n] = NULL;
	return run_cmd(argv);
}

static inline bool mounted_on(const char *mnt)
{
	char line[1024], dev[512], dir[512];
	bool found = false;
	FILE *f = fopen("/proc/mounts", "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%511s %511s", dev, dir) == 2 &&
			!strcmp(dir, mnt);
	fclose(f);
	return found;
}

/*
 * The options of every mount: nossd, no data allocation cluster, whose
 * empty size would make the allocator take a new chunk before it fills the
 * last free space of the others (make_data_chunks() needs them filled);
 * and @more if any.
 */
static inline void world_mount_options(char *opts, size_t size,
				       const char *more)
{
	snprintf(opts, size, "nodiscard,nossd%s%s", more ? "," : "",
		 more ? more : "");
}

/*
 * Mount the first @ndevs devices with @flags, and options @more if any;
 * the hold points used from then on are this filesystem's.
 */
static inline void world_mount(struct __test_metadata *_metadata,
			       struct fs_world *w, int ndevs,
			       unsigned long flags, const char *more)
{
	char opts[256];
	int ret;

	world_mount_options(opts, sizeof(opts), more);
	ret = mount_fs(&w->env, ndevs, flags, opts);
	ASSERT_EQ(0, ret) TH_LOG("mount %s on %s (%s): %s", w->env.devs[0],
				 w->env.mnt, opts, strerror(-ret));
	w->mounted = true;
	w->fd = open(w->env.mnt, O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, w->fd) TH_LOG("open %s: %s", w->env.mnt, strerror(errno));
	ret = balance_hold_attach(w->fd);
	ASSERT_EQ(0, ret) TH_LOG("the hold points' folder: %s", strerror(-ret));
}

/*
 * The same, with hold points @points set before a balance on disk resumes
 * (mount_fs_held()).
 */
static inline void world_mount_held(struct __test_metadata *_metadata,
				    struct fs_world *w, int ndevs,
				    unsigned long flags, const char *more,
				    unsigned long points)
{
	char opts[256];
	int ret;

	world_mount_options(opts, sizeof(opts), more);
	ret = mount_fs_held(&w->env, ndevs, flags, opts, points);
	ASSERT_EQ(0, ret) TH_LOG("mount %s on %s (%s), held 0x%lx: %s",
				 w->env.devs[0], w->env.mnt, opts, points,
				 strerror(-ret));
	w->mounted = true;
	w->fd = open(w->env.mnt, O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, w->fd) TH_LOG("open %s: %s", w->env.mnt, strerror(errno));
}

static inline void world_umount(struct __test_metadata *_metadata,
				struct fs_world *w)
{
	int ret;

	close(w->fd);
	w->fd = -1;
	ret = umount_fs(w->env.mnt);
	ASSERT_EQ(0, ret) TH_LOG("umount %s: %s", w->env.mnt, strerror(-ret));
	w->mounted = false;
}

/*
 * mkfs on the first @ndevs devices (each @size bytes, NULL: all of it) and
 * mount with @flags; false when skipped (fewer than @needed devices).
 */
static inline bool world_setup(struct __test_metadata *_metadata,
			       struct fs_world *w, int ndevs, int needed,
			       const char *data, const char *meta,
			       const char *size, unsigned long flags)
{
	w->fd = -1;
	w->uffd = -1;
	w->kmsg.fd = -1;
	w->ndevs = ndevs;
	env_load(&w->env);
	if (w->env.ndevs < needed)
		SKIP(return false,
		     "BTRFS_TEST_DEVS names %d devices, this test needs %d",
		     w->env.ndevs, needed);
	mkdir(w->env.mnt, 0755);
	/* A test killed by its timeout had no teardown: unmount its rest. */
	while (!umount2(w->env.mnt, 0))
		;
	ASSERT_EQ(0, make_fs_sized(&w->env, ndevs, data, meta, size))
		TH_LOG("mkfs.btrfs -d %s -m %s on %d devices", data, meta,
		       ndevs);
	world_mount(_metadata, w, ndevs, flags, NULL);
	/* The tests need them: without them they test nothing, a failure. */
	ASSERT_EQ(0, balance_hold_set(0))
		TH_LOG("no %s/balance_hold: the kernel lacks CONFIG_BTRFS_DEBUG's hold points",
		       balance_hold_dir);
	ASSERT_EQ(0, balance_hold_skip_set(0));
	ASSERT_EQ(0, kmsg_start(&w->kmsg));
	return true;
}

/*
 * The start of a teardown.  Whatever failed, nothing may stay held: later
 * tests would hang.  A device add waiting for its arguments on the
 * userfaultfd page gets -EFAULT.
 */
static inline void world_teardown_begin(struct __test_metadata *_metadata,
					struct fs_world *w)
{
	/* Unmounted, the filesystem has no balance thread to hold. */
	if (w->mounted || mounted_on(w->env.mnt)) {
		EXPECT_EQ(0, balance_hold_set(0));
		EXPECT_EQ(0, balance_hold_skip_set(0));
	}
	if (w->uffd >= 0)
		close(w->uffd);
	w->uffd = -1;
}

/* The end of a teardown, once no call runs: unmount, btrfs check. */
static inline void world_teardown_end(struct __test_metadata *_metadata,
				      struct fs_world *w)
{
	int ret = 0;

	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->mounted || mounted_on(w->env.mnt))
		ret = umount_fs(w->env.mnt);
	EXPECT_EQ(0, ret) TH_LOG("umount %s: %s", w->env.mnt, strerror(-ret));
	w->mounted = false;
	kmsg_end(&w->kmsg);
	EXPECT_EQ(0, check_fs(&w->env, w->ndevs))
		TH_LOG("btrfs check --readonly %s", w->env.devs[0]);
}

/* ---- Chunks ---- */

static inline int count_type(const struct chunk_list *l, __u64 bg_type)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++)
		n += !!(l->c[i].type & bg_type);
	return n;
}

/* The chunks that start below @bound. */
static inline __u64 count_below(const struct chunk_list *l, __u64 bound)
{
	__u64 n = 0;
	int i;

	for (i = 0; i < l->n; i++)
		n += l->c[i].start < bound;
	return n;
}

/* Bytes used in the chunks of @bg_type, as their block groups say. */
static inline __u64 used_of_type(const struct chunk_list *l, __u64 bg_type)
{
	__u64 used = 0;
	int i;

	for (i = 0; i < l->n; i++)
		if (l->c[i].type & bg_type)
			used += l->c[i].used;
	return used;
}

/* ---- Data: one file of DATA_FILE_SIZE in each data chunk ---- */

/*
 * Preallocate (no data written) 1 MiB pieces into the file fill<@idx>
 * until one of them needs a new data chunk: the data chunks there were
 * have no 1 MiB of free space left in one piece (their free space may be
 * split, e.g. by a superblock copy), and the new one holds that piece.
 */
static inline void fill_data_chunks(struct __test_metadata *_metadata,
				    struct fs_world *w, int idx)
{
	__u64 total, now, off;
	char path[PATH_SIZE];
	int fd;

	ASSERT_EQ(0, read_fs_sysfs(w->fd, "allocation/data/total_bytes",
				   &total));
	snprintf(path, sizeof(path), "%s/fill%02d", w->env.mnt, idx);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd) TH_LOG("create %s: %s", path, strerror(errno));
	for (off = 0;; off += SZ_1M) {
		ASSERT_GE(total, off) TH_LOG("no new data chunk");
		ASSERT_EQ(0, fallocate(fd, 0, off, SZ_1M))
			TH_LOG("fallocate %s at %llu: %s", path,
			       (unsigned long long)off, strerror(errno));
		ASSERT_EQ(0, read_fs_sysfs(w->fd, "allocation/data/total_bytes",
					   &now));
		if (now != total)
			break;
	}
	close(fd);
}

/*
 * Make the filesystem have @n data chunks, which hold a file of
 * DATA_FILE_SIZE each (f00 in the lowest) and nothing else: each file
 * after the first is written once the chunks before have no room for it,
 * into the chunk the filling made, and the filling is deleted at the end.
 * The highest chunk, where the balance walk starts, is data.
 */
static inline void make_data_chunks(struct __test_metadata *_metadata,
				    struct fs_world *w, int n)
{
	__u64 end = now_ms() + HANG_MS, used;
	char path[PATH_SIZE];
	struct chunk_list l;
	int i, ret;

	ASSERT_GE(MAX_DATA_FILES, n);
	for (i = 0; i < n; i++) {
		if (i)
			fill_data_chunks(_metadata, w, i);
		ret = write_pattern_file(w->env.mnt, i, DATA_FILE_SIZE);
		ASSERT_EQ(0, ret) TH_LOG("write f%02d: %s", i, strerror(-ret));
		w->nfiles = i + 1;
		ASSERT_EQ(0, syncfs(w->fd));
	}
	for (i = 1; i < n; i++) {
		snprintf(path, sizeof(path), "%s/fill%02d", w->env.mnt, i);
		ASSERT_EQ(0, unlink(path));
	}
	/* Freed extents leave the block groups' usage at a commit. */
	for (;;) {
		ASSERT_EQ(0, read_chunks(w->fd, &l));
		for (used = 0, i = 0; i < l.n; i++)
			if (l.c[i].type & BTRFS_BLOCK_GROUP_DATA)
				used += l.c[i].used;
		if (used == n * DATA_FILE_SIZE)
			break;
		ASSERT_GT(end, now_ms()) TH_LOG("preallocated space not freed");
		usleep(10 * 1000);
	}
	ASSERT_EQ(n, count_type(&l, BTRFS_BLOCK_GROUP_DATA));
	ASSERT_TRUE(!!(l.c[l.n - 1].type & BTRFS_BLOCK_GROUP_DATA))
		TH_LOG("the highest chunk is not data");
}

/* ---- Requests ---- */

static inline void data_request(struct btrfs_ioctl_balance_args *a)
{
	memset(a, 0, sizeof(*a));
	a->flags = BTRFS_BALANCE_DATA;
}

static inline void convert_request(struct btrfs_ioctl_balance_args *a,
				   __u64 target)
{
	data_request(a);
	a->data.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a->data.target = target;
}

/* vrange [0, 1) lies below every chunk: a valid request that moves nothing. */
static inline void noop_request(struct btrfs_ioctl_balance_args *a)
{
	data_request(a);
	a->data.flags = BTRFS_BALANCE_ARGS_VRANGE;
	a->data.vend = 1;
}

static inline void full_request(struct btrfs_ioctl_balance_args *a)
{
	memset(a, 0, sizeof(*a));
	a->flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
		   BTRFS_BALANCE_SYSTEM;
}

static inline int resume(int fd, struct btrfs_ioctl_balance_args *r)
{
	memset(r, 0, sizeof(*r));
	r->flags = BTRFS_BALANCE_RESUME;
	return balance_v2(fd, r);
}

static inline int add_device(int fd, const char *path)
{
	struct btrfs_ioctl_vol_args va;

	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "%s", path);
	return xioctl(fd, BTRFS_IOC_ADD_DEV, &va);
}

/* ---- Checks ---- */

static inline void expect_exclop(struct __test_metadata *_metadata,
				 struct fs_world *w, const char *want)
{
	char op[64];

	ASSERT_EQ(0, exclusive_operation(w->fd, op, sizeof(op)));
	EXPECT_STREQ(want, op);
}

/* Progress shows a paused balance of @flags, whose item is on disk. */
static inline void expect_paused(struct __test_metadata *_metadata,
				 struct fs_world *w, __u64 flags,
				 struct btrfs_ioctl_balance_args *p)
{
	ASSERT_EQ(0, balance_progress(w->fd, p)) TH_LOG("no paused balance");
	EXPECT_EQ(0ULL, p->state);
	EXPECT_EQ(flags, p->flags);
	EXPECT_EQ(1, balance_item_present(w->fd));
	expect_exclop(_metadata, w, "balance paused");
}

/* No balance, in memory or on disk, and the exclusive operation is free. */
static inline void expect_no_balance(struct __test_metadata *_metadata,
				     struct fs_world *w)
{
	struct btrfs_ioctl_balance_args p;

	EXPECT_EQ(-ENOTCONN, balance_progress(w->fd, &p));
	EXPECT_EQ(0, balance_item_present(w->fd));
	expect_exclop(_metadata, w, "none");
}

static inline void expect_log(struct __test_metadata *_metadata,
			      struct fs_world *w, const char *text)
{
	EXPECT_EQ(1, kmsg_contains(&w->kmsg, text))
		TH_LOG("not in the kernel log: \"%s\"", text);
}

static inline void expect_all_data(struct __test_metadata *_metadata,
				   struct fs_world *w, __u64 profile)
{
	struct chunk_list l;
	char desc[128];
	int i;

	ASSERT_EQ(0, read_chunks(w->fd, &l));
	for (i = 0; i < l.n; i++) {
		if (!(l.c[i].type & BTRFS_BLOCK_GROUP_DATA))
			continue;
		EXPECT_EQ(profile, chunk_profile(l.c[i].type))
			TH_LOG("%s", chunk_desc(&l.c[i], desc, sizeof(desc)));
	}
}

/*
 * Every chunk of @before was relocated exactly once since the world's
 * kmsg_start(), and nothing else was: no copy at or above @bound, nothing
 * twice.  @twice, if not -1, is a chunk of @before relocated twice (one
 * attempt stopped by a pause).
 */
static inline void expect_each_relocated_once(struct __test_metadata *_metadata,
					      struct fs_world *w,
					      const struct chunk_list *before,
					      __u64 bound, int twice)
{
	__u64 starts[4 * MAX_CHUNKS];
	int i, j, n, times;

	n = kmsg_relocations(&w->kmsg, starts, ARRAY_SIZE(starts));
	ASSERT_LE(0, n) TH_LOG("kernel log: %s", strerror(-n));
	for (j = 0; j < n; j++) {
		EXPECT_GT(bound, starts[j])
			TH_LOG("relocated %llu, a chunk made by the balance",
			       (unsigned long long)starts[j]);
		EXPECT_LE(0, find_chunk(before, starts[j]))
			TH_LOG("relocated %llu, not a chunk of the start",
			       (unsigned long long)starts[j]);
	}
	for (i = 0; i < before->n; i++) {
		for (times = 0, j = 0; j < n; j++)
			times += starts[j] == before->c[i].start;
		EXPECT_EQ(i == twice ? 2 : 1, times)
			TH_LOG("chunk %llu relocated %d times",
			       (unsigned long long)before->c[i].start, times);
	}
}

/* No chunk is left below @bound: every chunk of the start was relocated. */
static inline void expect_none_below(struct __test_metadata *_metadata,
				     struct fs_world *w, __u64 bound)
{
	struct chunk_list l;
	char desc[128];

	ASSERT_EQ(0, read_chunks(w->fd, &l));
	ASSERT_LT(0, l.n);
	EXPECT_LE(bound, l.c[0].start)
		TH_LOG("left behind: %s", chunk_desc(&l.c[0], desc,
						     sizeof(desc)));
}

/* ---- A userfaultfd page: a call that reads it waits for the test ---- */

/* A page whose first read by anyone, the kernel too, waits for the test. */
static inline void *uffd_page(struct __test_metadata *_metadata,
			      struct fs_world *w)
{
	long page = sysconf(_SC_PAGESIZE);
	struct uffdio_register reg;
	struct uffdio_api api;
	void *map;

	w->uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, w->uffd) TH_LOG("userfaultfd: %s", strerror(errno));
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	ASSERT_EQ(0, ioctl(w->uffd, UFFDIO_API, &api));
	map = mmap(NULL, page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)map;
	reg.range.len = page;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	ASSERT_EQ(0, ioctl(w->uffd, UFFDIO_REGISTER, &reg))
		TH_LOG("UFFDIO_REGISTER: %s", strerror(errno));
	return map;
}

/*
 * Wait until a call faults on the world's userfaultfd page (@what says
 * which call never did) and read the fault into @msg.
 */
static inline void uffd_wait(struct __test_metadata *_metadata,
			     struct fs_world *w, struct uffd_msg *msg,
			     const char *what)
{
	struct pollfd pfd;

	pfd.fd = w->uffd;
	pfd.events = POLLIN;
	ASSERT_EQ(1, poll(&pfd, 1, HANG_MS)) TH_LOG("%s", what);
	ASSERT_EQ((ssize_t)sizeof(*msg), read(w->uffd, msg, sizeof(*msg)));
	ASSERT_EQ(UFFD_EVENT_PAGEFAULT, msg->event);
}

/*
 * The arguments of a device add waiting on the page @map of uffd_page()
 * arrive: they name @path.
 */
static inline void uffd_give_dev_args(struct __test_metadata *_metadata,
				      struct fs_world *w, void *map,
				      const char *path)
{
	long page = sysconf(_SC_PAGESIZE);
	struct btrfs_ioctl_vol_args *va;
	struct uffdio_copy copy;

	va = calloc(1, page);
	ASSERT_NE(NULL, va);
	snprintf(va->name, sizeof(va->name), "%s", path);
	memset(&copy, 0, sizeof(copy));
	copy.dst = (unsigned long)map;
	copy.src = (unsigned long)va;
	copy.len = page;
	ASSERT_EQ(0, ioctl(w->uffd, UFFDIO_COPY, &copy))
		TH_LOG("UFFDIO_COPY: %s", strerror(errno));
	free(va);
}

#endif /* BTRFS_WORLD_H */
