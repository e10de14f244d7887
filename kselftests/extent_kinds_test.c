// SPDX-License-Identifier: GPL-2.0
/*
 * Every kind of extent relocated, and checked on both copies: a balance
 * converts the data of two devices from single to raid1 (and relocates
 * the metadata and system chunks), and afterwards the data reads back, the
 * extents are of the kind they were (compressed, shared, preallocated,
 * inline, nocow), the quota numbers are the same, and every copy is
 * checked: "btrfs scrub start -Bd" with no error, corrected or not, and
 * "btrfs check --check-data-csum" of the unmounted filesystem.
 *
 * Environment: BTRFS_TEST_DEVS (at least 2 block devices, reformatted),
 * BTRFS_TEST_MNT (default /mnt/test).  mkfs.btrfs and btrfs in PATH, root.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/syscall.h>

#include "btrfs_util.h"

/* The harness has an unused parameter; -Wextra is meant for this file. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* Each TEST_F wrapper of the harness keeps a local across its setjmp. */
#pragma GCC diagnostic ignored "-Wclobbered"

/* A wait that only a hang reaches (btrfs_world.h). */
#define HANG_MS		(600 * 1000)
#include "btrfs_world.h"

#define NDEVS		2
#define RAID1		BTRFS_BLOCK_GROUP_RAID1
#define FILE_SIZE	(4 * SZ_1M)

/* ---- The world (btrfs_world.h): two devices, metadata raid1 ---- */

/* mkfs (data @data, metadata raid1) on two devices and mount. */
static bool two_devices_setup(struct __test_metadata *_metadata,
			      struct fs_world *w, const char *data)
{
	return world_setup(_metadata, w, NDEVS, NDEVS, data, "raid1", NULL, 0);
}

static void two_devices_teardown(struct __test_metadata *_metadata,
				 struct fs_world *w)
{
	world_teardown_begin(_metadata, w);
	world_teardown_end(_metadata, w);
}

static void path_of(char *buf, const struct fs_world *w, const char *name)
{
	if (snprintf(buf, PATH_SIZE, "%s/%s", w->env.mnt, name) >= PATH_SIZE)
		buf[0] = '\0';	/* no such path: the test fails on it */
}

/*
 * Data to raid1, the metadata and system chunks relocated as they are:
 * every chunk of the filesystem is relocated once.
 */
static void relocate_all(struct __test_metadata *_metadata, struct fs_world *w)
{
	struct btrfs_ioctl_balance_args a;
	int ret;

	ASSERT_EQ(0, syncfs(w->fd));
	memset(&a, 0, sizeof(a));
	a.flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
		  BTRFS_BALANCE_SYSTEM;
	a.data.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a.data.target = RAID1;
	ret = balance_v2(w->fd, &a);
	ASSERT_EQ(0, ret) TH_LOG("the balance: %d", ret);
	EXPECT_EQ(a.stat.expected, a.stat.completed);
	EXPECT_LT(0ULL, a.stat.completed);
}

/* Every data chunk raid1. */
static void expect_data_raid1(struct __test_metadata *_metadata,
			      struct fs_world *w)
{
	struct chunk_list l;
	int i;

	ASSERT_EQ(0, read_chunks(w->fd, &l));
	for (i = 0; i < l.n; i++)
		if (l.c[i].type & BTRFS_BLOCK_GROUP_DATA)
			EXPECT_EQ(RAID1, chunk_profile(l.c[i].type))
				TH_LOG("data chunk at %llu not raid1",
				       (unsigned long long)l.c[i].start);
}

/*
 * Every copy checked: a scrub that finds nothing (scrub_fs() fails on a
 * corrected error too), then "btrfs check --check-data-csum" unmounted;
 * mounted again afterwards.
 */
static void check_every_copy(struct __test_metadata *_metadata,
			     struct fs_world *w)
{
	EXPECT_EQ(0, scrub_fs(w->env.mnt));
	world_umount(_metadata, w);
	EXPECT_EQ(0, check_fs_with(&w->env, NDEVS, true));
	world_mount(_metadata, w, NDEVS, 0, NULL);
}

/* ---- Contents ---- */

/* A text that compresses: @size bytes of numbered lines. */
static int write_text(const char *path, __u64 size, int flags)
{
	char line[64];
	__u64 done = 0;
	int fd, n;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	if (flags && ioctl(fd, FS_IOC_SETFLAGS, &flags)) {
		close(fd);
		return -errno;
	}
	while (done < size) {
		n = snprintf(line, sizeof(line), "line %012llu of the text\n",
			     (unsigned long long)done);
		if (n > (int)(size - done))
			n = size - done;
		if (write(fd, line, n) != n) {
			close(fd);
			return -EIO;
		}
		done += n;
	}
	n = fsync(fd) ? -errno : 0;
	close(fd);
	return n;
}

/* FNV-1a of the file, read after the page cache was dropped. */
static __u64 file_hash(const char *path, __u64 *size)
{
	__u64 h = 0xcbf29ce484222325ULL;
	char buf[65536];
	ssize_t n, i;
	int fd;

	drop_page_cache();
	*size = 0;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (i = 0; i < n; i++)
			h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ULL;
		*size += n;
	}
	close(fd);
	return n < 0 ? 0 : h;
}

/* The extents of @path with @flag set (FIEMAP_EXTENT_*), and in all. */
static int count_extents(const char *path, __u32 flag, int *all)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent fe[512];
	} m;
	int fd, i, n = 0;

	memset(&m, 0, sizeof(m));
	m.fm.fm_length = ~0ULL;
	m.fm.fm_flags = FIEMAP_FLAG_SYNC;
	m.fm.fm_extent_count = 512;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, FS_IOC_FIEMAP, &m.fm)) {
		n = -errno;
		close(fd);
		return n;
	}
	close(fd);
	for (i = 0; i < (int)m.fm.fm_mapped_extents; i++)
		n += !!(m.fe[i].fe_flags & flag);
	*all = m.fm.fm_mapped_extents;
	return n;
}

/* What a file is before the balance, to compare with after it. */
struct file_state {
	char path[PATH_SIZE];
	__u32 flag;		/* the FIEMAP flag of its kind */
	__u64 hash, size;
	int flagged, extents;
};

static void record(struct __test_metadata *_metadata, struct file_state *f,
		   const struct fs_world *w, const char *name, __u32 flag)
{
	path_of(f->path, w, name);
	f->flag = flag;
	f->hash = file_hash(f->path, &f->size);
	f->flagged = count_extents(f->path, flag, &f->extents);
	ASSERT_LT(0, f->flagged) TH_LOG("%s: no extent with flag 0x%x",
					f->path, flag);
}

static void expect_same(struct __test_metadata *_metadata,
			const struct file_state *f)
{
	__u64 size;
	int extents, flagged;

	EXPECT_EQ(f->hash, file_hash(f->path, &size)) TH_LOG("%s", f->path);
	EXPECT_EQ(f->size, size) TH_LOG("%s", f->path);
	flagged = count_extents(f->path, f->flag, &extents);
	EXPECT_EQ(f->flagged, flagged)
		TH_LOG("%s: %d extents with flag 0x%x before, %d after",
		       f->path, f->flagged, f->flag, flagged);
	EXPECT_EQ(f->extents, extents) TH_LOG("%s: extents", f->path);
}

/* ---- Compressed extents, zstd and lzo ---- */

FIXTURE(compressed) {
	struct fs_world w;
};

FIXTURE_VARIANT(compressed) {
	const char *opts;
};

FIXTURE_VARIANT_ADD(compressed, zstd) {
	.opts = "compress-force=zstd",
};

FIXTURE_VARIANT_ADD(compressed, lzo) {
	.opts = "compress-force=lzo",
};

FIXTURE_SETUP(compressed)
{
	int ret;

	if (!two_devices_setup(_metadata, &self->w, "single"))
		return;
	ret = remount_fs(self->w.env.mnt, 0, variant->opts);
	ASSERT_EQ(0, ret) TH_LOG("remount %s: %s", variant->opts,
				 strerror(-ret));
}

FIXTURE_TEARDOWN(compressed)
{
	two_devices_teardown(_metadata, &self->w);
}

/* Copied as they are on disk: still compressed, as many, the same data. */
TEST_F_TIMEOUT(compressed, compressed_extents_stay_compressed, 600)
{
	struct file_state f;
	char path[PATH_SIZE];

	path_of(path, &self->w, "text");
	ASSERT_EQ(0, write_text(path, FILE_SIZE, 0));
	record(_metadata, &f, &self->w, "text", FIEMAP_EXTENT_ENCODED);
	relocate_all(_metadata, &self->w);
	expect_same(_metadata, &f);
	expect_data_raid1(_metadata, &self->w);
	check_every_copy(_metadata, &self->w);
	expect_same(_metadata, &f);
}

/* ---- The other kinds, one filesystem each ---- */

FIXTURE(kinds) {
	struct fs_world w;
};

FIXTURE_SETUP(kinds)
{
	two_devices_setup(_metadata, &self->w, "single");
}

FIXTURE_TEARDOWN(kinds)
{
	two_devices_teardown(_metadata, &self->w);
}

/* "btrfs filesystem du -s --raw" of @dirs: the shared bytes, per line. */
static void fs_du(struct __test_metadata *_metadata, const struct fs_world *w,
		  char *out, size_t size)
{
	char a[PATH_SIZE], b[PATH_SIZE], c[PATH_SIZE];
	char *argv[] = { "btrfs", "filesystem", "du", "-s", "--raw", a, b, c,
			 NULL };

	path_of(a, w, "reflinked");
	path_of(b, w, "sv");
	path_of(c, w, "snap");
	ASSERT_EQ(0, run_cmd_text(argv, out, size));
}

static int create_subvol(int dirfd, const char *name)
{
	struct btrfs_ioctl_vol_args args = { 0 };

	snprintf(args.name, sizeof(args.name), "%s", name);
	return ioctl(dirfd, BTRFS_IOC_SUBVOL_CREATE, &args) ? -errno : 0;
}

static int snapshot(int dirfd, const char *src, const char *name)
{
	struct btrfs_ioctl_vol_args_v2 args = { 0 };
	int ret;

	args.fd = open(src, O_RDONLY | O_DIRECTORY);
	if (args.fd < 0)
		return -errno;
	snprintf(args.name, sizeof(args.name), "%s", name);
	ret = ioctl(dirfd, BTRFS_IOC_SNAP_CREATE_V2, &args) ? -errno : 0;
	close(args.fd);
	return ret;
}

static int reflink(const char *src, const char *dst)
{
	int in, out, ret = 0;

	in = open(src, O_RDONLY);
	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0 || ioctl(out, FICLONE, in))
		ret = -errno;
	if (out >= 0)
		close(out);
	close(in);
	return ret;
}

/*
 * A reflinked file and a snapshot: the shared extents stay shared, one
 * copy each, and "btrfs filesystem du" says the same before and after.
 */
TEST_F_TIMEOUT(kinds, reflinks_and_snapshots_stay_shared, 600)
{
	char p[PATH_SIZE], q[PATH_SIZE], sv[PATH_SIZE];
	char before[4096], after[4096];
	struct file_state f[3];

	path_of(p, &self->w, "reflinked");
	ASSERT_EQ(0, mkdir(p, 0755));
	ASSERT_EQ(0, write_pattern(p, 0, FILE_SIZE, SZ_1M, PATTERN_FSYNC));
	path_of(p, &self->w, "reflinked/f00");
	path_of(q, &self->w, "reflinked/clone");
	ASSERT_EQ(0, reflink(p, q));
	ASSERT_EQ(0, create_subvol(self->w.fd, "sv"));
	path_of(sv, &self->w, "sv");
	ASSERT_EQ(0, write_pattern(sv, 1, FILE_SIZE, SZ_1M, PATTERN_FSYNC));
	ASSERT_EQ(0, snapshot(self->w.fd, sv, "snap"));
	ASSERT_EQ(0, syncfs(self->w.fd));
	record(_metadata, &f[0], &self->w, "reflinked/f00",
	       FIEMAP_EXTENT_SHARED);
	record(_metadata, &f[1], &self->w, "reflinked/clone",
	       FIEMAP_EXTENT_SHARED);
	record(_metadata, &f[2], &self->w, "snap/f01", FIEMAP_EXTENT_SHARED);
	fs_du(_metadata, &self->w, before, sizeof(before));

	relocate_all(_metadata, &self->w);
	fs_du(_metadata, &self->w, after, sizeof(after));
	EXPECT_STREQ(before, after);
	expect_same(_metadata, &f[0]);
	expect_same(_metadata, &f[1]);
	expect_same(_metadata, &f[2]);
	expect_data_raid1(_metadata, &self->w);
	check_every_copy(_metadata, &self->w);
}

/*
 * A nocow file and a preallocated one, written in its first MiB only: the
 * nocow flag stays, the unwritten extents stay unwritten (and read as
 * zeroes: the hash covers them).
 */
TEST_F_TIMEOUT(kinds, nocow_and_preallocated_extents_keep_their_kind, 600)
{
	struct file_state nocow, prealloc;
	char p[PATH_SIZE], buf[65536];
	int flags = 0, fd, i;

	path_of(p, &self->w, "nocow");
	ASSERT_EQ(0, write_text(p, FILE_SIZE, FS_NOCOW_FL));
	path_of(p, &self->w, "prealloc");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fallocate(fd, 0, 0, FILE_SIZE));
	memset(buf, 'p', sizeof(buf));
	for (i = 0; i < (int)(SZ_1M / sizeof(buf)); i++)
		ASSERT_EQ((ssize_t)sizeof(buf),
			  pwrite(fd, buf, sizeof(buf), i * sizeof(buf)));
	ASSERT_EQ(0, fsync(fd));
	close(fd);

	/* The nocow file's kind is its inode flag: any extent will do. */
	record(_metadata, &nocow, &self->w, "nocow", FIEMAP_EXTENT_LAST);
	record(_metadata, &prealloc, &self->w, "prealloc",
	       FIEMAP_EXTENT_UNWRITTEN);
	relocate_all(_metadata, &self->w);
	expect_same(_metadata, &nocow);
	expect_same(_metadata, &prealloc);
	path_of(p, &self->w, "nocow");
	fd = open(p, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, FS_IOC_GETFLAGS, &flags));
	close(fd);
	EXPECT_NE(0, flags & FS_NOCOW_FL);
	expect_data_raid1(_metadata, &self->w);
	check_every_copy(_metadata, &self->w);
}

/* Inline extents live in the metadata: they stay inline, same data. */
TEST_F_TIMEOUT(kinds, inline_extents_stay_inline, 600)
{
	static const int sizes[] = { 100, 1000, 2000 };
	struct file_state f[3];
	char name[32], p[PATH_SIZE];
	int i;

	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "inline%d", sizes[i]);
		path_of(p, &self->w, name);
		ASSERT_EQ(0, write_text(p, sizes[i], 0));
	}
	ASSERT_EQ(0, syncfs(self->w.fd));
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "inline%d", sizes[i]);
		record(_metadata, &f[i], &self->w, name,
		       FIEMAP_EXTENT_DATA_INLINE);
	}
	relocate_all(_metadata, &self->w);
	for (i = 0; i < 3; i++)
		expect_same(_metadata, &f[i]);
	check_every_copy(_metadata, &self->w);
	for (i = 0; i < 3; i++)
		expect_same(_metadata, &f[i]);
}

/* ---- While the balance runs ---- */

/* A request that relocates every chunk (relocate_all()'s). */
static void all_request(struct btrfs_ioctl_balance_args *a)
{
	memset(a, 0, sizeof(*a));
	a->flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
		   BTRFS_BALANCE_SYSTEM;
	a->data.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a->data.target = RAID1;
}

#define OW_SIZE		(4 * SZ_1M)
#define OW_BLOCK	(64 * 1024)
#define LOG_RECORD	4096

/*
 * What the writer does while the balance runs, and what the files must
 * hold afterwards: "ow" overwritten in 64 KiB blocks (the expected content
 * kept in @ow), "tr" truncated and extended, "del-<n>" made and deleted,
 * "log" appended 4 KiB records, each fsync'd (the tree-log).
 */
struct writer {
	const struct fs_world *w;
	struct balance_thread *bt;
	unsigned char *ow;
	__u64 tr_size;
	int records;
	int rounds;
	int err;
};

static int write_all(const char *path, int flags, const void *buf, size_t len,
		     off_t off, bool sync)
{
	int fd = open(path, O_WRONLY | O_CREAT | flags, 0644);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, buf, len, off) != (ssize_t)len ||
	    (sync && fsync(fd)))
		ret = -EIO;
	close(fd);
	return ret;
}

static void *writer_fn(void *arg)
{
	struct writer *wr = arg;
	char ow[PATH_SIZE], tr[PATH_SIZE], lg[PATH_SIZE], del[PATH_SIZE];
	unsigned char rec[LOG_RECORD];
	__u64 off;
	int round;

	path_of(ow, wr->w, "ow");
	path_of(tr, wr->w, "tr");
	path_of(lg, wr->w, "log");
	for (round = 0; !wr->err && (round < 40 || !balance_thread_done(wr->bt));
	     round++) {
		/* Overwrite a block of "ow" with the round's byte. */
		off = (__u64)(round * 7 % (OW_SIZE / OW_BLOCK)) * OW_BLOCK;
		memset(wr->ow + off, 'a' + round % 26, OW_BLOCK);
		wr->err = write_all(ow, 0, wr->ow + off, OW_BLOCK, off, false);
		/* Truncate "tr" down, then extend it with a block. */
		if (!wr->err && truncate(tr, wr->tr_size / 2))
			wr->err = -errno;
		wr->tr_size /= 2;
		memset(rec, 't', sizeof(rec));
		if (!wr->err)
			wr->err = write_all(tr, 0, rec, sizeof(rec), wr->tr_size,
					    false);
		wr->tr_size += sizeof(rec);
		/* A file made and deleted. */
		snprintf(del, sizeof(del), "%s/del-%d", wr->w->env.mnt, round);
		if (!wr->err)
			wr->err = write_all(del, O_TRUNC, rec, sizeof(rec), 0,
					    false);
		if (!wr->err && unlink(del))
			wr->err = -errno;
		/* An fsync'd record appended to "log". */
		memset(rec, 'l', sizeof(rec));
		snprintf((char *)rec, 32, "record %d", wr->records);
		if (!wr->err)
			wr->err = write_all(lg, 0, rec, sizeof(rec),
					    (off_t)wr->records * LOG_RECORD, true);
		if (!wr->err)
			wr->records++;
	}
	wr->rounds = round;
	return NULL;
}

static void expect_writer_files(struct __test_metadata *_metadata,
				const struct writer *wr)
{
	char p[PATH_SIZE], want[32];
	unsigned char *buf = malloc(OW_SIZE);
	struct stat st;
	int fd, i;

	ASSERT_NE(NULL, buf);
	drop_page_cache();
	path_of(p, wr->w, "ow");
	fd = open(p, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)OW_SIZE, pread(fd, buf, OW_SIZE, 0));
	close(fd);
	EXPECT_EQ(0, memcmp(buf, wr->ow, OW_SIZE)) TH_LOG("ow differs");
	path_of(p, wr->w, "tr");
	ASSERT_EQ(0, stat(p, &st));
	EXPECT_EQ(wr->tr_size, (__u64)st.st_size);
	path_of(p, wr->w, "log");
	ASSERT_EQ(0, stat(p, &st));
	EXPECT_EQ((__u64)wr->records * LOG_RECORD, (__u64)st.st_size);
	fd = open(p, O_RDONLY);
	ASSERT_LE(0, fd);
	for (i = 0; i < wr->records; i++) {
		ASSERT_EQ(32, pread(fd, buf, 32, (off_t)i * LOG_RECORD));
		snprintf(want, sizeof(want), "record %d", i);
		EXPECT_EQ(0, strcmp((char *)buf, want)) TH_LOG("record %d", i);
	}
	close(fd);
	free(buf);
}

/*
 * Files overwritten, truncated, deleted and fsync'd while the balance
 * relocates their chunks: each ends as the writer left it.
 */
TEST_F_TIMEOUT(kinds, files_changed_while_the_balance_runs, 900)
{
	struct btrfs_ioctl_balance_args a;
	struct balance_thread bt = { 0 };
	struct writer wr = { .w = &self->w, .bt = &bt };
	char p[PATH_SIZE];
	pthread_t tid;
	int i;

	wr.ow = malloc(OW_SIZE);
	ASSERT_NE(NULL, wr.ow);
	for (i = 0; i < (int)OW_SIZE; i++)
		wr.ow[i] = i * 13;
	path_of(p, &self->w, "ow");
	ASSERT_EQ(0, write_all(p, O_TRUNC, wr.ow, OW_SIZE, 0, true));
	path_of(p, &self->w, "tr");
	wr.tr_size = 2 * SZ_1M;
	ASSERT_EQ(0, write_all(p, O_TRUNC, wr.ow, wr.tr_size, 0, true));
	/* Data in more than one chunk, so that the balance takes a while. */
	ASSERT_EQ(0, write_pattern(self->w.env.mnt, 0, 64 * SZ_1M, SZ_1M,
				   PATTERN_FSYNC));
	ASSERT_EQ(0, syncfs(self->w.fd));

	all_request(&a);
	ASSERT_EQ(0, balance_thread_start(&bt, self->w.fd, &a));
	ASSERT_EQ(0, pthread_create(&tid, NULL, writer_fn, &wr));
	ASSERT_EQ(0, pthread_join(tid, NULL));
	ASSERT_EQ(0, balance_thread_join(&bt));
	EXPECT_EQ(0, wr.err) TH_LOG("the writer: %s", strerror(-wr.err));
	TH_LOG("the writer made %d rounds while the balance ran", wr.rounds);
	expect_writer_files(_metadata, &wr);
	expect_data_raid1(_metadata, &self->w);
	check_every_copy(_metadata, &self->w);
	expect_writer_files(_metadata, &wr);
	free(wr.ow);
}

/* A scrub runs beside the balance: both end without an error. */
TEST_F_TIMEOUT(kinds, a_scrub_runs_beside_the_balance, 900)
{
	struct btrfs_ioctl_balance_args a;
	struct balance_thread bt = { 0 };
	__u64 bad;

	ASSERT_EQ(0, write_pattern(self->w.env.mnt, 0, 64 * SZ_1M, SZ_1M,
				   PATTERN_FSYNC));
	ASSERT_EQ(0, syncfs(self->w.fd));
	all_request(&a);
	ASSERT_EQ(0, balance_thread_start(&bt, self->w.fd, &a));
	EXPECT_EQ(0, scrub_fs(self->w.env.mnt));
	ASSERT_EQ(0, balance_thread_join(&bt));
	EXPECT_EQ(0, verify_pattern(self->w.env.mnt, 0, 64 * SZ_1M, &bad,
				    SZ_1M, true));
	expect_data_raid1(_metadata, &self->w);
	check_every_copy(_metadata, &self->w);
}

/* ---- A degraded raid1 mount, balanced back ---- */

/* Make the kernel forget @dev, so that a mount without it is degraded. */
static int forget_device(const char *dev)
{
	struct btrfs_ioctl_vol_args args = { 0 };
	int fd, ret;

	fd = open("/dev/btrfs-control", O_RDWR);
	if (fd < 0)
		return -errno;
	snprintf(args.name, sizeof(args.name), "%s", dev);
	ret = ioctl(fd, BTRFS_IOC_FORGET_DEV, &args) ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * raid1 on two devices; the second one missing, a degraded mount writes a
 * file (in single chunks: raid1 needs two devices); with both devices
 * back, a convert to raid1 of everything makes every chunk raid1 with two
 * good copies again.
 */
FIXTURE(degraded) {
	struct fs_world w;
};

FIXTURE_SETUP(degraded)
{
	two_devices_setup(_metadata, &self->w, "raid1");
}

FIXTURE_TEARDOWN(degraded)
{
	two_devices_teardown(_metadata, &self->w);
}

TEST_F_TIMEOUT(degraded, a_degraded_raid1_is_balanced_back, 600)
{
	struct btrfs_ioctl_balance_args a;
	__u64 bad;
	int ret;

	ASSERT_EQ(0, write_pattern(self->w.env.mnt, 0, FILE_SIZE, SZ_1M,
				   PATTERN_FSYNC));
	world_umount(_metadata, &self->w);

	ret = forget_device(self->w.env.devs[1]);
	ASSERT_EQ(0, ret) TH_LOG("forget %s: %s", self->w.env.devs[1],
				 strerror(-ret));
	world_mount(_metadata, &self->w, 1, 0, "degraded");
	ASSERT_EQ(0, write_pattern(self->w.env.mnt, 1, FILE_SIZE, SZ_1M,
				   PATTERN_FSYNC));
	world_umount(_metadata, &self->w);

	world_mount(_metadata, &self->w, NDEVS, 0, NULL);
	memset(&a, 0, sizeof(a));
	a.flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
		  BTRFS_BALANCE_SYSTEM | BTRFS_BALANCE_FORCE;
	a.data.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a.data.target = RAID1;
	a.meta.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a.meta.target = RAID1;
	a.sys.flags = BTRFS_BALANCE_ARGS_CONVERT;
	a.sys.target = RAID1;
	ret = balance_v2(self->w.fd, &a);
	ASSERT_EQ(0, ret) TH_LOG("the balance back to raid1: %d", ret);
	{
		struct chunk_list l;
		int i;

		ASSERT_EQ(0, read_chunks(self->w.fd, &l));
		for (i = 0; i < l.n; i++)
			EXPECT_EQ(RAID1, chunk_profile(l.c[i].type))
				TH_LOG("chunk at %llu not raid1",
				       (unsigned long long)l.c[i].start);
	}
	EXPECT_EQ(0, verify_pattern(self->w.env.mnt, 0, FILE_SIZE, &bad, SZ_1M,
				    true));
	EXPECT_EQ(0, verify_pattern(self->w.env.mnt, 1, FILE_SIZE, &bad, SZ_1M,
				    true));
	check_every_copy(_metadata, &self->w);
}

/* ---- Quotas, full and simple ---- */

struct qgroup_numbers {
	int n;
	__u64 id[16], rfer[16], excl[16];
};

static int qgroup_info_cb(const struct btrfs_ioctl_search_header *sh,
			  const void *item, void *ctx)
{
	const struct btrfs_qgroup_info_item *qi = item;
	struct qgroup_numbers *q = ctx;

	if (sh->type != BTRFS_QGROUP_INFO_KEY || q->n == 16)
		return 0;
	q->id[q->n] = sh->offset;
	q->rfer[q->n] = le64toh(qi->rfer);
	q->excl[q->n] = le64toh(qi->excl);
	q->n++;
	return 0;
}

static int read_qgroups(int fd, struct qgroup_numbers *q)
{
	struct btrfs_ioctl_search_key sk = {
		.tree_id = BTRFS_QUOTA_TREE_OBJECTID,
		.min_type = BTRFS_QGROUP_INFO_KEY,
		.max_type = BTRFS_QGROUP_INFO_KEY,
		.max_objectid = (__u64)-1,
		.max_offset = (__u64)-1,
	};

	memset(q, 0, sizeof(*q));
	if (syncfs(fd))
		return -errno;
	return tree_search(fd, &sk, qgroup_info_cb, q);
}

FIXTURE(quotas) {
	struct fs_world w;
};

FIXTURE_VARIANT(quotas) {
	__u64 cmd;	/* BTRFS_QUOTA_CTL_ENABLE or _ENABLE_SIMPLE_QUOTA */
};

FIXTURE_VARIANT_ADD(quotas, full) {
	.cmd = BTRFS_QUOTA_CTL_ENABLE,
};

FIXTURE_VARIANT_ADD(quotas, simple) {
	.cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA,
};

FIXTURE_SETUP(quotas)
{
	two_devices_setup(_metadata, &self->w, "single");
}

FIXTURE_TEARDOWN(quotas)
{
	world_teardown_begin(_metadata, &self->w);
	/*
	 * btrfs-progs 6.2 cannot check a filesystem that had simple quotas:
	 * a new one for the checks of the teardown and of the host.
	 */
	if (variant->cmd == BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA &&
	    self->w.mounted) {
		close(self->w.fd);
		self->w.fd = -1;
		EXPECT_EQ(0, umount_fs(self->w.env.mnt));
		self->w.mounted = false;
		EXPECT_EQ(0, make_fs(&self->w.env, NDEVS, "single", "raid1"));
	}
	world_teardown_end(_metadata, &self->w);
}

/*
 * The numbers of every qgroup (referenced, exclusive) are the same after
 * the balance: relocation moves extents, it does not change who owns them.
 */
TEST_F_TIMEOUT(quotas, qgroup_numbers_are_the_same_after_a_balance, 600)
{
	struct btrfs_ioctl_quota_ctl_args qa = { .cmd = variant->cmd };
	struct btrfs_ioctl_quota_rescan_args ra = { 0 };
	struct qgroup_numbers before, after;
	char sv[PATH_SIZE];
	int i;

	ASSERT_EQ(0, ioctl(self->w.fd, BTRFS_IOC_QUOTA_CTL, &qa))
		TH_LOG("quota ctl %llu: %s", (unsigned long long)qa.cmd,
		       strerror(errno));
	ASSERT_EQ(0, create_subvol(self->w.fd, "sv"));
	path_of(sv, &self->w, "sv");
	ASSERT_EQ(0, write_pattern(sv, 0, FILE_SIZE, SZ_1M, PATTERN_FSYNC));
	ASSERT_EQ(0, write_pattern(self->w.env.mnt, 1, FILE_SIZE, SZ_1M,
				   PATTERN_FSYNC));
	ASSERT_EQ(0, snapshot(self->w.fd, sv, "snap"));
	/* A full rescan's numbers are the ones to keep; simple has none. */
	ioctl(self->w.fd, BTRFS_IOC_QUOTA_RESCAN_WAIT, &ra);
	ASSERT_EQ(0, read_qgroups(self->w.fd, &before));
	ASSERT_LE(3, before.n);

	relocate_all(_metadata, &self->w);
	ioctl(self->w.fd, BTRFS_IOC_QUOTA_RESCAN_WAIT, &ra);
	ASSERT_EQ(0, read_qgroups(self->w.fd, &after));
	ASSERT_EQ(before.n, after.n);
	for (i = 0; i < before.n; i++) {
		EXPECT_EQ(before.id[i], after.id[i]);
		EXPECT_EQ(before.rfer[i], after.rfer[i])
			TH_LOG("qgroup 0/%llu referenced",
			       (unsigned long long)before.id[i]);
		EXPECT_EQ(before.excl[i], after.excl[i])
			TH_LOG("qgroup 0/%llu exclusive",
			       (unsigned long long)before.id[i]);
	}
	/*
	 * btrfs-progs 6.2 (Debian 12) cannot open a filesystem that had
	 * simple quotas (their incompat bit stays): the scrub alone checks
	 * every copy then.
	 */
	if (variant->cmd == BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA) {
		EXPECT_EQ(0, scrub_fs(self->w.env.mnt));
	} else {
		check_every_copy(_metadata, &self->w);
	}
}

TEST_HARNESS_MAIN
