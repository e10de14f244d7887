// SPDX-License-Identifier: GPL-2.0
/*
 * The btrfs balance ioctls (BTRFS_IOC_BALANCE_V2, BTRFS_IOC_BALANCE_CTL,
 * BTRFS_IOC_BALANCE_PROGRESS) on real multi-device filesystems.
 *
 * Environment: BTRFS_TEST_DEVS, the block devices to use, space separated
 * (4 of them, each used by nothing else; they are reformatted); and
 * BTRFS_TEST_MNT, an empty directory to mount on (default /mnt/test).
 * mkfs.btrfs and btrfs must be in PATH.  Run as root.
 *
 * Every test makes a fresh filesystem, and its teardown unmounts it and
 * runs "btrfs check --readonly".  Which chunks a balance relocated is read
 * from the chunk tree: a relocated chunk disappears and its contents land
 * in chunks at higher logical addresses, so the moved set is the chunk
 * starts before minus those after.  Expected sets come from the filter
 * definitions applied to the chunk tree read before the balance.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <grp.h>

#include "btrfs_util.h"

/* The harness has an unused parameter; -Wextra is meant for this file. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* Each TEST_F wrapper of the harness keeps a local across its setjmp. */
#pragma GCC diagnostic ignored "-Wclobbered"

#define ALL_TYPES	(BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA | \
			 BTRFS_BALANCE_SYSTEM)
#define SINGLE		BTRFS_AVAIL_ALLOC_BIT_SINGLE
#define EXCL_BUSY	BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS
#define FILL_SIZE	(8 * SZ_1M)
#define FILE_SIZE	(4 * SZ_1M)
#define MAX_FILES	16
#define NOBODY		65534
#define NO_SUCH_DEV	"/nonexistent/btrfs-balance-test"
#define NO_SUCH_DEVID	999

/* ---- A world: a fresh filesystem for each test ---- */

struct world {
	struct test_env env;
	int ndevs;			/* devices in the filesystem */
	const char *opts;		/* the fixture's mount options */
	int fd;				/* the mount point, open */
	bool mounted;
	struct balance_thread bt;
	int nfiles;
	__u64 file_size[MAX_FILES];
	bool file_present[MAX_FILES];
};

static void world_mount(struct __test_metadata *_metadata, struct world *w,
			unsigned long flags, const char *more)
{
	char opts[256];
	int ret;

	snprintf(opts, sizeof(opts), "%s%s%s", w->opts,
		 *w->opts && more ? "," : "", more ? more : "");
	ret = mount_fs(&w->env, w->ndevs, flags, opts);
	ASSERT_EQ(0, ret) TH_LOG("mount %s on %s (%s): %s", w->env.devs[0],
				 w->env.mnt, opts, strerror(-ret));
	w->mounted = true;
	w->fd = open(w->env.mnt, O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, w->fd) TH_LOG("open %s: %s", w->env.mnt, strerror(errno));
}

static void world_umount(struct __test_metadata *_metadata, struct world *w)
{
	int ret;

	close(w->fd);
	w->fd = -1;
	ret = umount_fs(w->env.mnt);
	ASSERT_EQ(0, ret) TH_LOG("umount %s: %s", w->env.mnt, strerror(-ret));
	w->mounted = false;
}

/* mkfs on the first @ndevs devices and mount; false when skipped. */
static bool world_setup(struct __test_metadata *_metadata, struct world *w,
			int ndevs, int needed, const char *data,
			const char *meta, const char *opts)
{
	w->fd = -1;
	w->ndevs = ndevs;
	w->opts = opts ? opts : "";
	env_load(&w->env);
	if (w->env.ndevs < needed)
		SKIP(return false,
		     "BTRFS_TEST_DEVS names %d devices, this world needs %d",
		     w->env.ndevs, needed);
	mkdir(w->env.mnt, 0755);
	/* A test killed by its timeout had no teardown: unmount its leftover. */
	while (!umount2(w->env.mnt, 0))
		;
	ASSERT_EQ(0, make_fs(&w->env, ndevs, data, meta))
		TH_LOG("mkfs.btrfs -d %s -m %s on %d devices", data, meta, ndevs);
	world_mount(_metadata, w, 0, NULL);
	return true;
}

static void world_teardown(struct __test_metadata *_metadata, struct world *w)
{
	int i;

	/* A test that failed while its balance ran: stop the balance. */
	for (i = 0; w->bt.started && i < 600 && !balance_thread_done(&w->bt); i++) {
		balance_ctl(w->fd, BTRFS_BALANCE_CTL_CANCEL);
		usleep(100 * 1000);
	}
	balance_thread_join(&w->bt);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->mounted)
		EXPECT_EQ(0, umount_fs(w->env.mnt));
	w->mounted = false;
	EXPECT_EQ(0, check_fs(&w->env, w->ndevs))
		TH_LOG("btrfs check --readonly %s", w->env.devs[0]);
}

/*
 * f00 (8 MiB) goes first and alone: with single data it fills the 8 MiB
 * data chunk mkfs made.  The @nfiles files of 4 MiB that follow then land
 * in a data chunk the kernel allocates, above the system and metadata
 * chunks, so every world has at least two data chunks.
 */
static void write_dataset(struct __test_metadata *_metadata, struct world *w,
			  int nfiles)
{
	int i, ret;

	ASSERT_GT(MAX_FILES, nfiles);
	for (i = 0; i <= nfiles; i++) {
		w->file_size[i] = i ? FILE_SIZE : FILL_SIZE;
		ret = write_pattern_file(w->env.mnt, i, w->file_size[i]);
		ASSERT_EQ(0, ret) TH_LOG("write f%02d: %s", i, strerror(-ret));
		w->file_present[i] = true;
		w->nfiles = i + 1;
		if (i == 0)
			ASSERT_EQ(0, syncfs(w->fd));
	}
	ASSERT_EQ(0, syncfs(w->fd));
}

static void remove_file(struct __test_metadata *_metadata, struct world *w,
			int idx)
{
	char path[PATH_SIZE];

	pattern_path(path, w->env.mnt, idx);
	ASSERT_EQ(0, unlink(path));
	w->file_present[idx] = false;
}

/* Read every file back from disk (caches dropped) and compare. */
static void verify_dataset(struct __test_metadata *_metadata, struct world *w)
{
	__u64 bad;
	int i, ret;

	ASSERT_EQ(0, drop_page_cache());
	for (i = 0; i < w->nfiles; i++) {
		if (!w->file_present[i])
			continue;
		ret = verify_pattern_file(w->env.mnt, i, w->file_size[i], &bad);
		ASSERT_EQ(0, ret) TH_LOG("f%02d: %s at offset %llu", i,
					 strerror(-ret), (unsigned long long)bad);
	}
}

/* ---- Requests ---- */

/* A request for @types with the per-type args @b (or none) for each. */
static void request(struct btrfs_ioctl_balance_args *a, __u64 types,
		    const struct btrfs_balance_args *b)
{
	memset(a, 0, sizeof(*a));
	a->flags = types;
	if (!b)
		return;
	if (types & BTRFS_BALANCE_DATA)
		a->data = *b;
	if (types & BTRFS_BALANCE_METADATA)
		a->meta = *b;
	if (types & BTRFS_BALANCE_SYSTEM)
		a->sys = *b;
}

/* vrange [0, 1) lies below every chunk: a valid request that moves nothing. */
static void noop_request(struct btrfs_ioctl_balance_args *a, __u64 types)
{
	struct btrfs_balance_args b;

	memset(&b, 0, sizeof(b));
	b.flags = BTRFS_BALANCE_ARGS_VRANGE;
	b.vend = 1;
	request(a, types, &b);
}

static void convert_args(struct btrfs_balance_args *b, __u64 target)
{
	memset(b, 0, sizeof(*b));
	b->flags = BTRFS_BALANCE_ARGS_CONVERT;
	b->target = target;
}

static void convert_request(struct btrfs_ioctl_balance_args *a, __u64 types,
			    __u64 target)
{
	struct btrfs_balance_args b;

	convert_args(&b, target);
	request(a, types, &b);
}

/* ---- What a request selects, from the filter definitions ---- */

static const struct btrfs_balance_args *
args_for(const struct btrfs_ioctl_balance_args *a, __u64 type)
{
	if (type & BTRFS_BLOCK_GROUP_DATA)
		return (a->flags & BTRFS_BALANCE_DATA) ? &a->data : NULL;
	if (type & BTRFS_BLOCK_GROUP_SYSTEM)
		return (a->flags & BTRFS_BALANCE_SYSTEM) ? &a->sys : NULL;
	return (a->flags & BTRFS_BALANCE_METADATA) ? &a->meta : NULL;
}

static __u64 percent_of(__u64 len, __u64 percent)
{
	return len * percent / 100;
}

/* usage=N, and the upper bound of usage=MIN..MAX: "less than N percent". */
static __u64 usage_below(const struct chunk *c, __u64 percent)
{
	if (!percent)
		return 1;
	return percent > 100 ? c->length : percent_of(c->length, percent);
}

/* A stripe of @c on @devid overlaps the half-open physical [pstart, pend). */
static bool chunk_on_dev(const struct chunk *c, __u64 devid,
			 __u64 pstart, __u64 pend)
{
	__u32 i;

	for (i = 0; i < c->num_stripes; i++)
		if (c->stripes[i].devid == devid &&
		    c->stripes[i].offset < pend &&
		    c->stripes[i].offset + stripe_length(c) > pstart)
			return true;
	return false;
}

/* Every filter but the limits, which count across chunks. */
static bool filters_select(const struct chunk *c,
			   const struct btrfs_balance_args *b)
{
	__u64 f = b->flags;

	if ((f & BTRFS_BALANCE_ARGS_PROFILES) &&
	    !(b->profiles & chunk_profile(c->type)))
		return false;
	if (f & BTRFS_BALANCE_ARGS_USAGE) {
		if (c->used >= usage_below(c, b->usage))
			return false;
	} else if (f & BTRFS_BALANCE_ARGS_USAGE_RANGE) {
		if (c->used < percent_of(c->length, b->usage_min) ||
		    c->used >= usage_below(c, b->usage_max))
			return false;
	}
	if ((f & BTRFS_BALANCE_ARGS_DEVID) &&
	    !chunk_on_dev(c, b->devid, 0, (__u64)-1))
		return false;
	if ((f & BTRFS_BALANCE_ARGS_DRANGE) && (f & BTRFS_BALANCE_ARGS_DEVID) &&
	    !chunk_on_dev(c, b->devid, b->pstart, b->pend))
		return false;
	if ((f & BTRFS_BALANCE_ARGS_VRANGE) &&
	    !(c->start < b->vend && c->start + c->length > b->vstart))
		return false;
	if ((f & BTRFS_BALANCE_ARGS_STRIPES_RANGE) &&
	    (c->num_stripes < b->stripes_min || c->num_stripes > b->stripes_max))
		return false;
	if ((f & BTRFS_BALANCE_ARGS_SOFT) && (f & BTRFS_BALANCE_ARGS_CONVERT) &&
	    b->target == chunk_profile(c->type))
		return false;
	return true;
}

static int select_by_filters(const struct chunk_list *l,
			     const struct btrfs_ioctl_balance_args *a,
			     bool *sel)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++) {
		const struct btrfs_balance_args *b = args_for(a, l->c[i].type);

		sel[i] = b && filters_select(&l->c[i], b);
		n += sel[i];
	}
	return n;
}

static int count_type(const struct chunk_list *l, __u64 bg_type)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++)
		n += !!(l->c[i].type & bg_type);
	return n;
}

/* Data chunks whose profile is not @profile. */
static int count_data_not(const struct chunk_list *l, __u64 profile)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++)
		n += (l->c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
		     chunk_profile(l->c[i].type) != profile;
	return n;
}

/* The highest data chunk: the first one the balance walk meets. */
static int top_data_chunk(const struct chunk_list *l)
{
	int i;

	for (i = l->n - 1; i >= 0; i--)
		if (l->c[i].type & BTRFS_BLOCK_GROUP_DATA)
			return i;
	return -1;
}

static __u64 count_moved(const struct chunk_list *before,
			 const struct chunk_list *after)
{
	__u64 n = 0;
	int i;

	for (i = 0; i < before->n; i++)
		n += chunk_moved(before, i, after);
	return n;
}

static const char *chunk_desc(const struct chunk *c, char *buf, size_t size)
{
	size_t len;
	__u32 i;

	len = snprintf(buf, size, "%s %s at %llu+%llu used %llu, stripes",
		       type_name(c->type), profile_name(chunk_profile(c->type)),
		       (unsigned long long)c->start,
		       (unsigned long long)c->length,
		       (unsigned long long)c->used);
	for (i = 0; i < c->num_stripes && len < size; i++)
		len += snprintf(buf + len, size - len, " %llu@%llu",
				(unsigned long long)c->stripes[i].devid,
				(unsigned long long)c->stripes[i].offset);
	return buf;
}

/* ---- Running a balance and checking what moved ---- */

/* Nothing was relocated and no balance item is left. */
static void expect_unchanged(struct __test_metadata *_metadata,
			     struct world *w, const struct chunk_list *before)
{
	struct chunk_list after;
	char desc[256];
	int i;

	ASSERT_EQ(0, read_chunks(w->fd, &after));
	EXPECT_EQ(before->n, after.n);
	for (i = 0; i < before->n; i++)
		EXPECT_FALSE(chunk_moved(before, i, &after))
			TH_LOG("relocated: %s",
			       chunk_desc(&before->c[i], desc, sizeof(desc)));
	EXPECT_EQ(0, balance_item_present(w->fd));
}

/*
 * Run @a and check that exactly the chunks of @before marked in @expect
 * were relocated, and that the stats returned agree: every chunk was
 * considered, and the selected ones were expected and completed.
 */
static void balance_expecting(struct __test_metadata *_metadata,
			      struct world *w,
			      struct btrfs_ioctl_balance_args *a,
			      const struct chunk_list *before,
			      const bool *expect)
{
	__u64 nexp = 0, nmoved = 0;
	struct chunk_list after;
	char desc[256];
	int i, ret;

	for (i = 0; i < before->n; i++)
		nexp += expect[i];
	ret = balance_v2(w->fd, a);
	ASSERT_EQ(0, ret) TH_LOG("BTRFS_IOC_BALANCE_V2 returned %d", ret);
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	for (i = 0; i < before->n; i++) {
		bool moved = chunk_moved(before, i, &after);

		nmoved += moved;
		EXPECT_EQ(expect[i], moved)
			TH_LOG("%s: %s", expect[i] ? "not relocated" :
			       "relocated but not selected",
			       chunk_desc(&before->c[i], desc, sizeof(desc)));
	}
	EXPECT_EQ(nexp, nmoved);
	EXPECT_EQ(nexp, a->stat.expected);
	EXPECT_EQ(nexp, a->stat.completed);
	EXPECT_EQ((__u64)before->n, a->stat.considered);
	EXPECT_EQ(0ULL, a->state);
	EXPECT_EQ(0, balance_item_present(w->fd));
}

/* A chunk the test names on its own, whatever the filter definitions say. */
struct watch {
	__u64 start;
	bool moves;
	bool alone;		/* and nothing else moves */
};

/*
 * Balance @types with the filter @b.  The filter must select some chunks
 * but not all of them, and agree with @watch if given.
 */
static void filter_balance(struct __test_metadata *_metadata, struct world *w,
			   __u64 types, const struct btrfs_balance_args *b,
			   const struct watch *watch)
{
	struct btrfs_ioctl_balance_args a;
	struct chunk_list before;
	bool expect[MAX_CHUNKS];
	int i, n;

	ASSERT_EQ(0, read_chunks(w->fd, &before));
	request(&a, types, b);
	n = select_by_filters(&before, &a, expect);
	ASSERT_LT(0, n) TH_LOG("the filter selects no chunk here");
	ASSERT_GT(before.n, n) TH_LOG("the filter selects every chunk here");
	if (watch) {
		i = find_chunk(&before, watch->start);
		ASSERT_LE(0, i);
		ASSERT_EQ(watch->moves, expect[i]);
		if (watch->alone)
			ASSERT_EQ(1, n);
	}
	balance_expecting(_metadata, w, &a, &before, expect);
}

/* ---- Filters: one world, four devices, single data, raid1 metadata ---- */

FIXTURE(filters) {
	struct world w;
};

FIXTURE_VARIANT(filters) {
	int ndevs;
	const char *data;
	const char *meta;
};

/*
 * Data chunks: the 8 MiB one of mkfs (filled by f00) and one of the
 * kernel's, holding the rest; metadata and system: raid1, on other
 * devices than the first data chunk.
 */
FIXTURE_VARIANT_ADD(filters, four_devices) {
	.ndevs = 4,
	.data = "single",
	.meta = "raid1",
};

FIXTURE_SETUP(filters)
{
	/*
	 * commit=300: an emptied block group that is not the last of its
	 * profile is deleted by the cleaner thread, which the transaction
	 * thread wakes every commit interval; usage=0 needs it to stay.
	 */
	world_setup(_metadata, &self->w, variant->ndevs, variant->ndevs,
		    variant->data, variant->meta, "commit=300,nodiscard");
}

FIXTURE_TEARDOWN(filters)
{
	world_teardown(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, data_flag_moves_every_data_chunk_only, 120)
{
	struct btrfs_ioctl_balance_args a;
	struct chunk_list before;
	bool expect[MAX_CHUNKS];
	int i;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &before));
	for (i = 0; i < before.n; i++)
		expect[i] = before.c[i].type & BTRFS_BLOCK_GROUP_DATA;
	request(&a, BTRFS_BALANCE_DATA, NULL);
	balance_expecting(_metadata, &self->w, &a, &before, expect);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, profiles_selects_chunks_of_the_listed_profiles, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_PROFILES };
	struct chunk_list l;
	__u64 all = 0, first;
	int i;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	for (i = 0; i < l.n; i++)
		all |= chunk_profile(l.c[i].type);
	/* The profile of the lowest chunk (single: the extended format bit). */
	first = chunk_profile(l.c[0].type);
	b.profiles = first;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	b.profiles = all & ~first;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, usage_zero_moves_only_empty_chunks, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_USAGE };
	struct watch watch = { .moves = true };
	struct chunk_list l;
	int i;

	write_dataset(_metadata, &self->w, 3);
	/* f00 alone filled the first data chunk: deleting it empties it. */
	remove_file(_metadata, &self->w, 0);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	for (i = 0; i < l.n; i++)
		if ((l.c[i].type & BTRFS_BLOCK_GROUP_DATA) && !l.c[i].used)
			break;
	ASSERT_GT(l.n, i) TH_LOG("no empty data chunk after deleting f00");
	watch.start = l.c[i].start;
	b.usage = 0;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, &watch);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, usage_range_and_threshold_select_by_fill, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_USAGE_RANGE };

	write_dataset(_metadata, &self->w, 3);
	/* At least 1% and less than 100% used: not the full first data chunk. */
	b.usage_min = 1;
	b.usage_max = 100;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	memset(&b, 0, sizeof(b));
	b.flags = BTRFS_BALANCE_ARGS_USAGE;
	b.usage = 50;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, devid_selects_chunks_with_a_stripe_there, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_DEVID };
	struct btrfs_ioctl_balance_args a;
	struct chunk_list l;
	bool sel[MAX_CHUNKS];
	int devid, n = 0;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	/* A device that holds some chunks but not all of them. */
	for (devid = 1; devid <= self->w.ndevs; devid++) {
		b.devid = devid;
		request(&a, ALL_TYPES, &b);
		n = select_by_filters(&l, &a, sel);
		if (n > 0 && n < l.n)
			break;
	}
	ASSERT_GE(self->w.ndevs, devid) TH_LOG("every device holds all chunks");
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, drange_is_half_open, 120)
{
	struct btrfs_balance_args b = {
		.flags = BTRFS_BALANCE_ARGS_DEVID | BTRFS_BALANCE_ARGS_DRANGE,
	};
	struct watch watch = { 0 };
	struct chunk_list l;
	__u64 p = 0, end = 0;
	int i, j, s, t;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	/* A stripe with another chunk's stripe right after it on its device. */
	for (i = 0; i < l.n; i++) {
		for (s = 0; s < (int)l.c[i].num_stripes; s++) {
			p = l.c[i].stripes[s].offset;
			end = p + stripe_length(&l.c[i]);
			for (j = 0; j < l.n; j++)
				for (t = 0; j != i && t < (int)l.c[j].num_stripes; t++)
					if (l.c[j].stripes[t].devid ==
					    l.c[i].stripes[s].devid &&
					    l.c[j].stripes[t].offset == end)
						goto found;
		}
	}
found:
	ASSERT_GT(l.n, i) TH_LOG("no two adjacent device extents");
	b.devid = l.c[i].stripes[s].devid;
	watch.start = l.c[i].start;
	/* [end, end + 1): the next extent on the device, not this one. */
	b.pstart = end;
	b.pend = end + 1;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, &watch);
	/* [start, end): this one and nothing else. */
	b.pstart = p;
	b.pend = end;
	watch.moves = true;
	watch.alone = true;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, &watch);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, vrange_is_half_open, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_VRANGE };
	struct watch watch = { 0 };
	struct chunk_list l;
	__u64 start, end;
	int i;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	/* A chunk with a chunk ending where it starts and one starting where it ends. */
	for (i = 1; i < l.n - 1; i++)
		if (l.c[i - 1].start + l.c[i - 1].length == l.c[i].start &&
		    l.c[i].start + l.c[i].length == l.c[i + 1].start)
			break;
	ASSERT_GT(l.n - 1, i) TH_LOG("no chunk between two adjacent ones");
	start = l.c[i].start;
	end = start + l.c[i].length;
	watch.start = start;
	/* [start - 1, start): the last byte of the chunk below only. */
	b.vstart = start - 1;
	b.vend = start;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, &watch);
	/* [end, end + 1): the first byte of the chunk above only. */
	b.vstart = end;
	b.vend = end + 1;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, &watch);
	/* [start, end): exactly this chunk. */
	b.vstart = start;
	b.vend = end;
	watch.moves = true;
	watch.alone = true;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, &watch);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, limit_takes_at_most_n_chunks_from_the_top, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_LIMIT };
	struct btrfs_ioctl_balance_args a;
	struct chunk_list l;
	bool expect[MAX_CHUNKS];
	int i, ndata;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	ASSERT_LE(2, count_type(&l, BTRFS_BLOCK_GROUP_DATA));
	/* limit=1: the first data chunk of the walk, which goes top down. */
	for (i = 0; i < l.n; i++)
		expect[i] = i == top_data_chunk(&l);
	b.limit = 1;
	request(&a, BTRFS_BALANCE_DATA, &b);
	balance_expecting(_metadata, &self->w, &a, &l, expect);
	/* The returned request shows the limit as given, not consumed. */
	EXPECT_EQ(BTRFS_BALANCE_ARGS_LIMIT, a.data.flags);
	EXPECT_EQ(1ULL, a.data.limit);

	/* limit=N with fewer matching chunks: all of them, no minimum. */
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	ndata = count_type(&l, BTRFS_BLOCK_GROUP_DATA);
	for (i = 0; i < l.n; i++)
		expect[i] = l.c[i].type & BTRFS_BLOCK_GROUP_DATA;
	b.limit = ndata + 2;
	request(&a, BTRFS_BALANCE_DATA, &b);
	balance_expecting(_metadata, &self->w, &a, &l, expect);
	EXPECT_EQ((__u64)ndata + 2, a.data.limit);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, limit_range_needs_its_minimum, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_LIMIT_RANGE };
	struct btrfs_ioctl_balance_args a;
	struct chunk_list l;
	bool expect[MAX_CHUNKS];
	__u64 ndata;
	int i;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	ASSERT_LE(2, count_type(&l, BTRFS_BLOCK_GROUP_DATA));
	/* limit=1..1: the top data chunk. */
	for (i = 0; i < l.n; i++)
		expect[i] = i == top_data_chunk(&l);
	b.limit_min = 1;
	b.limit_max = 1;
	request(&a, BTRFS_BALANCE_DATA, &b);
	balance_expecting(_metadata, &self->w, &a, &l, expect);
	EXPECT_EQ(1U, a.data.limit_min);
	EXPECT_EQ(1U, a.data.limit_max);

	/* A minimum above the number of data chunks: counted, none relocated. */
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	ndata = count_type(&l, BTRFS_BLOCK_GROUP_DATA);
	b.limit_min = ndata + 1;
	b.limit_max = ndata + 2;
	request(&a, BTRFS_BALANCE_DATA, &b);
	ASSERT_EQ(0, balance_v2(self->w.fd, &a));
	EXPECT_EQ(ndata, a.stat.expected);
	EXPECT_EQ(0ULL, a.stat.completed);
	EXPECT_EQ((__u64)l.n, a.stat.considered);
	expect_unchanged(_metadata, &self->w, &l);
	verify_dataset(_metadata, &self->w);
}

TEST_F_TIMEOUT(filters, stripes_range_bounds_are_inclusive, 120)
{
	struct btrfs_balance_args b = { .flags = BTRFS_BALANCE_ARGS_STRIPES_RANGE };
	__u32 lo = UINT32_MAX, hi = 0;
	struct chunk_list l;
	int i;

	write_dataset(_metadata, &self->w, 3);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	for (i = 0; i < l.n; i++) {
		if (l.c[i].num_stripes < lo)
			lo = l.c[i].num_stripes;
		if (l.c[i].num_stripes > hi)
			hi = l.c[i].num_stripes;
	}
	ASSERT_LT(lo, hi) TH_LOG("every chunk has %u stripes", lo);
	b.stripes_min = hi;
	b.stripes_max = hi;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	b.stripes_min = lo;
	b.stripes_max = hi - 1;
	filter_balance(_metadata, &self->w, ALL_TYPES, &b, NULL);
	verify_dataset(_metadata, &self->w);
}

/* ---- Converts: a chain of profiles per world ---- */

struct convert_step {
	__u64 data;
	__u64 meta;		/* and system */
};

FIXTURE(convert) {
	struct world w;
};

FIXTURE_VARIANT(convert) {
	int ndevs;
	const char *data;
	const char *meta;
	int nsteps;
	struct convert_step steps[4];
};

FIXTURE_VARIANT_ADD(convert, four_devices) {
	.ndevs = 4,
	.data = "single",
	.meta = "single",
	.nsteps = 4,
	.steps = {
		{ BTRFS_BLOCK_GROUP_RAID1, BTRFS_BLOCK_GROUP_RAID1 },
		{ BTRFS_BLOCK_GROUP_RAID10, BTRFS_BLOCK_GROUP_RAID10 },
		{ BTRFS_BLOCK_GROUP_RAID1, BTRFS_BLOCK_GROUP_RAID1 },
		{ SINGLE, SINGLE },
	},
};

FIXTURE_VARIANT_ADD(convert, three_devices) {
	.ndevs = 3,
	.data = "single",
	.meta = "raid1",
	.nsteps = 3,
	.steps = {
		{ BTRFS_BLOCK_GROUP_RAID1C3, BTRFS_BLOCK_GROUP_RAID1C3 },
		{ BTRFS_BLOCK_GROUP_RAID1, BTRFS_BLOCK_GROUP_RAID1 },
		{ SINGLE, SINGLE },
	},
};

FIXTURE_VARIANT_ADD(convert, one_device) {
	.ndevs = 1,
	.data = "single",
	.meta = "dup",
	.nsteps = 2,
	.steps = {
		{ BTRFS_BLOCK_GROUP_DUP, SINGLE },
		{ SINGLE, BTRFS_BLOCK_GROUP_DUP },
	},
};

FIXTURE_SETUP(convert)
{
	world_setup(_metadata, &self->w, variant->ndevs, variant->ndevs,
		    variant->data, variant->meta, NULL);
}

FIXTURE_TEARDOWN(convert)
{
	world_teardown(_metadata, &self->w);
}

/*
 * Convert data, metadata and system to @step.  Without soft every chunk of
 * those types is relocated.  A step that drops metadata redundancy is
 * refused without BTRFS_BALANCE_FORCE first.
 */
static void convert_step(struct __test_metadata *_metadata, struct world *w,
			 const struct convert_step *step)
{
	struct btrfs_ioctl_balance_args a;
	struct chunk_list before, after;
	bool expect[MAX_CHUNKS];
	bool force = false;
	char desc[256];
	int i;

	ASSERT_EQ(0, read_chunks(w->fd, &before));
	for (i = 0; i < before.n; i++) {
		expect[i] = true;
		if (!(before.c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
		    profile_is_redundant(chunk_profile(before.c[i].type)) &&
		    !profile_is_redundant(step->meta))
			force = true;
	}
	memset(&a, 0, sizeof(a));
	a.flags = ALL_TYPES;
	convert_args(&a.data, step->data);
	convert_args(&a.meta, step->meta);
	convert_args(&a.sys, step->meta);
	if (force) {
		EXPECT_EQ(-EINVAL, balance_v2(w->fd, &a))
			TH_LOG("metadata to %s without force",
			       profile_name(step->meta));
		expect_unchanged(_metadata, w, &before);
		a.flags |= BTRFS_BALANCE_FORCE;
	}
	balance_expecting(_metadata, w, &a, &before, expect);
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	for (i = 0; i < after.n; i++) {
		__u64 want = (after.c[i].type & BTRFS_BLOCK_GROUP_DATA) ?
				step->data : step->meta;

		EXPECT_EQ(want, chunk_profile(after.c[i].type))
			TH_LOG("want %s: %s", profile_name(want),
			       chunk_desc(&after.c[i], desc, sizeof(desc)));
	}
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(convert, each_step_leaves_every_chunk_in_the_target, 180)
{
	int s;

	write_dataset(_metadata, &self->w, 2);
	for (s = 0; s < variant->nsteps; s++)
		convert_step(_metadata, &self->w, &variant->steps[s]);
}

TEST_F_TIMEOUT(convert, soft_skips_chunks_already_converted, 180)
{
	__u64 target = variant->steps[0].data;
	struct btrfs_ioctl_balance_args a;
	struct btrfs_balance_args b;
	struct chunk_list l;
	bool expect[MAX_CHUNKS];
	int i, ndata;

	write_dataset(_metadata, &self->w, 2);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	ndata = count_type(&l, BTRFS_BLOCK_GROUP_DATA);
	ASSERT_LE(2, ndata);
	ASSERT_EQ(ndata, count_data_not(&l, target));
	/* Convert one chunk, the top one. */
	convert_args(&b, target);
	b.flags |= BTRFS_BALANCE_ARGS_LIMIT;
	b.limit = 1;
	request(&a, BTRFS_BALANCE_DATA, &b);
	for (i = 0; i < l.n; i++)
		expect[i] = i == top_data_chunk(&l);
	balance_expecting(_metadata, &self->w, &a, &l, expect);

	/* soft: only the chunks that do not have the target profile yet. */
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	ndata = count_type(&l, BTRFS_BLOCK_GROUP_DATA);
	ASSERT_LT(0, count_data_not(&l, target));
	ASSERT_GT(ndata, count_data_not(&l, target));
	for (i = 0; i < l.n; i++)
		expect[i] = (l.c[i].type & BTRFS_BLOCK_GROUP_DATA) &&
			    chunk_profile(l.c[i].type) != target;
	convert_args(&b, target);
	b.flags |= BTRFS_BALANCE_ARGS_SOFT;
	request(&a, BTRFS_BALANCE_DATA, &b);
	balance_expecting(_metadata, &self->w, &a, &l, expect);
	ASSERT_EQ(0, read_chunks(self->w.fd, &l));
	EXPECT_EQ(0, count_data_not(&l, target));
	verify_dataset(_metadata, &self->w);
}

/* ---- Refused requests: nothing moves ---- */

FIXTURE(errors) {
	struct world w;
};

FIXTURE_VARIANT(errors) {
	int ndevs;
};

FIXTURE_VARIANT_ADD(errors, three_devices) {
	.ndevs = 3,
};

FIXTURE_SETUP(errors)
{
	world_setup(_metadata, &self->w, variant->ndevs, variant->ndevs,
		    "single", "raid1", NULL);
}

FIXTURE_TEARDOWN(errors)
{
	world_teardown(_metadata, &self->w);
}

/* A convert of @types to @target that selects no chunk. */
static void noop_convert(struct btrfs_ioctl_balance_args *a, __u64 types,
			 __u64 target)
{
	struct btrfs_balance_args b;

	convert_args(&b, target);
	b.flags |= BTRFS_BALANCE_ARGS_VRANGE;
	b.vend = 1;
	request(a, types, &b);
}

/* BTRFS_IOC_BALANCE_V2 with @a returns @want and changes nothing. */
static void expect_result(struct __test_metadata *_metadata, struct world *w,
			  struct btrfs_ioctl_balance_args *a, int want,
			  const char *what)
{
	struct chunk_list before;
	int ret;

	ASSERT_EQ(0, read_chunks(w->fd, &before));
	ret = balance_v2(w->fd, a);
	EXPECT_EQ(want, ret) TH_LOG("%s", what);
	if (!ret)
		EXPECT_EQ(0ULL, a->stat.completed);
	expect_unchanged(_metadata, w, &before);
}

TEST_F_TIMEOUT(errors, legacy_balance_ioctl_is_enotty, 60)
{
	struct btrfs_ioctl_vol_args va;
	struct chunk_list before;

	memset(&va, 0, sizeof(va));
	ASSERT_EQ(0, read_chunks(self->w.fd, &before));
	EXPECT_EQ(-ENOTTY, xioctl(self->w.fd, BTRFS_IOC_BALANCE, &va));
	expect_unchanged(_metadata, &self->w, &before);
}

TEST_F_TIMEOUT(errors, unknown_top_level_flag_bits_are_einval, 60)
{
	static const int bits[] = { 5, 6, 7, 10, 63 };
	struct btrfs_ioctl_balance_args a;
	char what[64];
	unsigned int i;

	noop_request(&a, BTRFS_BALANCE_DATA);
	expect_result(_metadata, &self->w, &a, 0, "the request without extra bits");
	for (i = 0; i < ARRAY_SIZE(bits); i++) {
		noop_request(&a, BTRFS_BALANCE_DATA);
		a.flags |= 1ULL << bits[i];
		snprintf(what, sizeof(what), "top-level flag bit %d", bits[i]);
		expect_result(_metadata, &self->w, &a, -EINVAL, what);
	}
}

TEST_F_TIMEOUT(errors, unknown_per_type_flag_bit_is_einval, 60)
{
	static const __u64 types[] = {
		BTRFS_BALANCE_DATA, BTRFS_BALANCE_METADATA, BTRFS_BALANCE_SYSTEM,
	};
	struct btrfs_ioctl_balance_args a;
	char what[64];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		noop_request(&a, types[i]);
		snprintf(what, sizeof(what), "type 0x%llx without extra bits",
			 (unsigned long long)types[i]);
		expect_result(_metadata, &self->w, &a, 0, what);
		noop_request(&a, types[i]);
		/* Only the args of the selected type. */
		if (types[i] == BTRFS_BALANCE_DATA)
			a.data.flags |= 1ULL << 11;
		else if (types[i] == BTRFS_BALANCE_METADATA)
			a.meta.flags |= 1ULL << 11;
		else
			a.sys.flags |= 1ULL << 11;
		snprintf(what, sizeof(what), "type 0x%llx with flag bit 11",
			 (unsigned long long)types[i]);
		expect_result(_metadata, &self->w, &a, -EINVAL, what);
	}
}

static const __u64 convert_types[] = {
	BTRFS_BALANCE_DATA, BTRFS_BALANCE_METADATA | BTRFS_BALANCE_SYSTEM,
};

TEST_F_TIMEOUT(errors, convert_to_an_invalid_profile_is_einval, 60)
{
	static const __u64 invalid[] = {
		0,		/* no profile bit: single needs its extended bit */
		BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID1,
		1ULL << 47,	/* not a profile */
	};
	struct btrfs_ioctl_balance_args a;
	unsigned int i, t;
	char what[96];

	for (t = 0; t < ARRAY_SIZE(convert_types); t++) {
		/* The same request with a valid target is accepted. */
		noop_convert(&a, convert_types[t], BTRFS_BLOCK_GROUP_RAID1);
		expect_result(_metadata, &self->w, &a, 0, "convert to raid1");
		for (i = 0; i < ARRAY_SIZE(invalid); i++) {
			/* Force: only the profile itself may be the reason. */
			noop_convert(&a, convert_types[t] | BTRFS_BALANCE_FORCE,
				     invalid[i]);
			snprintf(what, sizeof(what), "type 0x%llx to 0x%llx",
				 (unsigned long long)convert_types[t],
				 (unsigned long long)invalid[i]);
			expect_result(_metadata, &self->w, &a, -EINVAL, what);
		}
	}
}

TEST_F_TIMEOUT(errors, reducing_metadata_redundancy_needs_force, 60)
{
	static const __u64 types[] = {
		BTRFS_BALANCE_METADATA, BTRFS_BALANCE_SYSTEM,
	};
	struct btrfs_ioctl_balance_args a;
	unsigned int t;

	/* raid1 -> single: refused without force, accepted with it. */
	for (t = 0; t < ARRAY_SIZE(types); t++) {
		noop_convert(&a, types[t], SINGLE);
		expect_result(_metadata, &self->w, &a, -EINVAL, "without force");
		noop_convert(&a, types[t] | BTRFS_BALANCE_FORCE, SINGLE);
		expect_result(_metadata, &self->w, &a, 0, "with force");
	}
}

/* What @req returns in a child with uid and gid 65534 and no capabilities. */
static int errno_as_nobody(int fd, unsigned long req, unsigned long arg)
{
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
		    setresuid(NOBODY, NOBODY, NOBODY))
			_exit(200);
		if (geteuid() != NOBODY)
			_exit(201);
		_exit(ioctl(fd, req, arg) < 0 ? errno : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST_F_TIMEOUT(errors, unprivileged_caller_gets_eperm, 60)
{
	struct btrfs_ioctl_balance_args a, p;
	struct chunk_list before;
	int fd = self->w.fd;

	ASSERT_EQ(0, read_chunks(fd, &before));
	noop_request(&a, BTRFS_BALANCE_DATA);
	EXPECT_EQ(EPERM, errno_as_nobody(fd, BTRFS_IOC_BALANCE_V2,
					 (unsigned long)&a));
	EXPECT_EQ(EPERM, errno_as_nobody(fd, BTRFS_IOC_BALANCE_CTL,
					 BTRFS_BALANCE_CTL_PAUSE));
	EXPECT_EQ(EPERM, errno_as_nobody(fd, BTRFS_IOC_BALANCE_CTL,
					 BTRFS_BALANCE_CTL_CANCEL));
	EXPECT_EQ(EPERM, errno_as_nobody(fd, BTRFS_IOC_BALANCE_PROGRESS,
					 (unsigned long)&p));
	expect_unchanged(_metadata, &self->w, &before);
	/* The same calls as root. */
	EXPECT_EQ(0, balance_v2(fd, &a));
	EXPECT_EQ(-ENOTCONN, balance_ctl(fd, BTRFS_BALANCE_CTL_PAUSE));
	EXPECT_EQ(-ENOTCONN, balance_ctl(fd, BTRFS_BALANCE_CTL_CANCEL));
	EXPECT_EQ(-ENOTCONN, balance_progress(fd, &p));
}

TEST_F_TIMEOUT(errors, read_only_mount_gets_erofs, 60)
{
	struct btrfs_ioctl_balance_args a;

	world_umount(_metadata, &self->w);
	world_mount(_metadata, &self->w, MS_RDONLY, NULL);
	noop_request(&a, BTRFS_BALANCE_DATA);
	expect_result(_metadata, &self->w, &a, -EROFS, "read-only mount");
	convert_request(&a, BTRFS_BALANCE_DATA, BTRFS_BLOCK_GROUP_RAID1);
	expect_result(_metadata, &self->w, &a, -EROFS, "read-only mount");
}

TEST_F_TIMEOUT(errors, bad_user_pointer_gets_efault, 60)
{
	long page = sysconf(_SC_PAGESIZE);
	struct btrfs_ioctl_balance_args a;
	struct chunk_list before;
	int fd = self->w.fd;
	char *map;

	ASSERT_EQ(0, read_chunks(fd, &before));
	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, munmap(map + page, page));
	EXPECT_EQ(-EFAULT, xioctl(fd, BTRFS_IOC_BALANCE_V2, NULL));
	EXPECT_EQ(-EFAULT, xioctl(fd, BTRFS_IOC_BALANCE_V2, (void *)1));
	EXPECT_EQ(-EFAULT, xioctl(fd, BTRFS_IOC_BALANCE_V2, map + page));
	/* A valid request whose second half lies in the unmapped page. */
	noop_request(&a, BTRFS_BALANCE_DATA);
	memcpy(map + page - sizeof(a) / 2, &a, sizeof(a) / 2);
	EXPECT_EQ(-EFAULT, xioctl(fd, BTRFS_IOC_BALANCE_V2,
				  map + page - sizeof(a) / 2));
	munmap(map, page);
	expect_unchanged(_metadata, &self->w, &before);
}

TEST_F_TIMEOUT(errors, ctl_and_progress_without_a_balance, 60)
{
	struct btrfs_ioctl_balance_args a;
	struct chunk_list before;
	int fd = self->w.fd;

	ASSERT_EQ(0, read_chunks(fd, &before));
	EXPECT_EQ(-EINVAL, balance_ctl(fd, 3));
	EXPECT_EQ(-EINVAL, balance_ctl(fd, 0));
	EXPECT_EQ(-ENOTCONN, balance_ctl(fd, BTRFS_BALANCE_CTL_PAUSE));
	EXPECT_EQ(-ENOTCONN, balance_ctl(fd, BTRFS_BALANCE_CTL_CANCEL));
	EXPECT_EQ(-ENOTCONN, balance_progress(fd, &a));
	memset(&a, 0, sizeof(a));
	a.flags = BTRFS_BALANCE_RESUME;
	EXPECT_EQ(-ENOTCONN, balance_v2(fd, &a));
	expect_unchanged(_metadata, &self->w, &before);
}

/* ---- Convert targets against the number of devices ---- */

FIXTURE(too_few_devices) {
	struct world w;
};

FIXTURE_VARIANT(too_few_devices) {
	int ndevs;
	__u64 fits;		/* a profile that needs exactly ndevs devices */
	__u64 too_big[2];	/* profiles that need more, 0 if unused */
};

FIXTURE_VARIANT_ADD(too_few_devices, two_devices) {
	.ndevs = 2,
	.fits = BTRFS_BLOCK_GROUP_RAID1,
	.too_big = { BTRFS_BLOCK_GROUP_RAID6, BTRFS_BLOCK_GROUP_RAID1C3 },
};

FIXTURE_VARIANT_ADD(too_few_devices, three_devices) {
	.ndevs = 3,
	.fits = BTRFS_BLOCK_GROUP_RAID1C3,
	.too_big = { BTRFS_BLOCK_GROUP_RAID1C4 },
};

FIXTURE_SETUP(too_few_devices)
{
	world_setup(_metadata, &self->w, variant->ndevs, variant->ndevs,
		    "single", "raid1", NULL);
}

FIXTURE_TEARDOWN(too_few_devices)
{
	world_teardown(_metadata, &self->w);
}

TEST_F_TIMEOUT(too_few_devices, convert_beyond_the_devices_is_einval, 60)
{
	struct btrfs_ioctl_balance_args a;
	unsigned int i, t;
	char what[96];

	for (t = 0; t < ARRAY_SIZE(convert_types); t++) {
		noop_convert(&a, convert_types[t] | BTRFS_BALANCE_FORCE,
			     variant->fits);
		snprintf(what, sizeof(what), "%s on %d devices",
			 profile_name(variant->fits), variant->ndevs);
		expect_result(_metadata, &self->w, &a, 0, what);
		for (i = 0; i < ARRAY_SIZE(variant->too_big); i++) {
			if (!variant->too_big[i])
				continue;
			noop_convert(&a, convert_types[t] | BTRFS_BALANCE_FORCE,
				     variant->too_big[i]);
			snprintf(what, sizeof(what), "%s on %d devices",
				 profile_name(variant->too_big[i]),
				 variant->ndevs);
			expect_result(_metadata, &self->w, &a, -EINVAL, what);
		}
	}
}

/* ---- A balance that runs: progress, pause, cancel, exclusivity, mount ---- */

FIXTURE(live) {
	struct world w;
};

FIXTURE_VARIANT(live) {
	int ndevs;		/* in the filesystem; one more is the spare */
	__u64 target;		/* data convert target of the balance */
};

/*
 * 32 MiB of data in two chunks, converted from single to raid1: long
 * enough under emulation to be seen running and to be paused before it
 * ends.  The fourth device is the spare for device add.
 */
FIXTURE_VARIANT_ADD(live, three_devices_and_a_spare) {
	.ndevs = 3,
	.target = BTRFS_BLOCK_GROUP_RAID1,
};

FIXTURE_SETUP(live)
{
	world_setup(_metadata, &self->w, variant->ndevs, variant->ndevs + 1,
		    "single", "raid1", NULL);
}

FIXTURE_TEARDOWN(live)
{
	world_teardown(_metadata, &self->w);
}

#define LIVE_FILES	6

static void start_running(struct __test_metadata *_metadata, struct world *w,
			  const struct btrfs_ioctl_balance_args *a)
{
	int ret;

	ASSERT_EQ(0, balance_thread_start(&w->bt, w->fd, a));
	ret = wait_balance_running(w->fd, &w->bt, 60 * 1000);
	ASSERT_EQ(0, ret) TH_LOG("balance not seen running (%d, ioctl: %d)",
				 ret, w->bt.ret);
}

static void pause_running(struct __test_metadata *_metadata, struct world *w)
{
	ASSERT_EQ(0, balance_ctl(w->fd, BTRFS_BALANCE_CTL_PAUSE));
	ASSERT_EQ(-ECANCELED, balance_thread_join(&w->bt));
}

static int add_device(int fd, const char *path)
{
	struct btrfs_ioctl_vol_args va;

	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "%s", path);
	return xioctl(fd, BTRFS_IOC_ADD_DEV, &va);
}

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

TEST_F_TIMEOUT(live, progress_counters_only_grow_while_running, 180)
{
	struct btrfs_ioctl_balance_args a, again, p;
	struct btrfs_balance_progress last = { 0 };
	struct world *w = &self->w;
	struct chunk_list before, after;
	__u64 ndata;
	int ret, running = 0;

	write_dataset(_metadata, w, LIVE_FILES);
	ASSERT_EQ(0, read_chunks(w->fd, &before));
	ndata = count_type(&before, BTRFS_BLOCK_GROUP_DATA);
	convert_request(&a, BTRFS_BALANCE_DATA, variant->target);
	ASSERT_EQ(0, balance_thread_start(&w->bt, w->fd, &a));
	for (; !balance_thread_done(&w->bt); usleep(1000)) {
		ret = balance_progress(w->fd, &p);
		if (ret == -ENOTCONN)	/* not started yet, or just ended */
			continue;
		ASSERT_EQ(0, ret);
		ASSERT_LE(last.expected, p.stat.expected);
		ASSERT_LE(last.considered, p.stat.considered);
		ASSERT_LE(last.completed, p.stat.completed);
		ASSERT_LE(p.stat.completed, p.stat.expected);
		ASSERT_GE(ndata, p.stat.expected);
		ASSERT_GE((__u64)before.n, p.stat.considered);
		last = p.stat;
		if (!(p.state & BTRFS_BALANCE_STATE_RUNNING) || running++)
			continue;
		/* A second start, or a resume, while one runs. */
		again = a;
		EXPECT_EQ(-EINPROGRESS, balance_v2(w->fd, &again));
		memset(&again, 0, sizeof(again));
		again.flags = BTRFS_BALANCE_RESUME;
		EXPECT_EQ(-EINPROGRESS, balance_v2(w->fd, &again));
	}
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	EXPECT_LT(0, running) TH_LOG("progress never showed the balance running");
	EXPECT_LE(last.completed, w->bt.args.stat.completed);
	EXPECT_EQ(ndata, w->bt.args.stat.expected);
	EXPECT_EQ(ndata, w->bt.args.stat.completed);
	EXPECT_EQ((__u64)before.n, w->bt.args.stat.considered);
	EXPECT_EQ(-ENOTCONN, balance_progress(w->fd, &p));
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	EXPECT_EQ(0, count_data_not(&after, variant->target));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(live, pause_keeps_the_balance_and_resume_ends_it, 180)
{
	struct btrfs_ioctl_balance_args a, again, p, r;
	struct world *w = &self->w;
	struct chunk_list before, paused, after;
	__u64 left;

	write_dataset(_metadata, w, LIVE_FILES);
	ASSERT_EQ(0, read_chunks(w->fd, &before));
	convert_request(&a, BTRFS_BALANCE_DATA, variant->target);
	start_running(_metadata, w, &a);
	pause_running(_metadata, w);

	/* What the paused ioctl returned agrees with what it did. */
	ASSERT_EQ(0, read_chunks(w->fd, &paused));
	EXPECT_EQ(0ULL, w->bt.args.state & BTRFS_BALANCE_STATE_RUNNING);
	EXPECT_EQ(count_moved(&before, &paused), w->bt.args.stat.completed);
	EXPECT_LE(w->bt.args.stat.completed, w->bt.args.stat.expected);
	left = count_data_not(&paused, variant->target);
	ASSERT_LT(0ULL, left) TH_LOG("everything was converted before the pause");

	/* Paused: kept in memory and on disk, not running. */
	ASSERT_EQ(0, balance_progress(w->fd, &p));
	EXPECT_EQ(0ULL, p.state & BTRFS_BALANCE_STATE_RUNNING);
	EXPECT_EQ(BTRFS_BALANCE_DATA, p.flags);
	EXPECT_EQ(BTRFS_BALANCE_ARGS_CONVERT, p.data.flags);
	EXPECT_EQ(variant->target, p.data.target);
	EXPECT_EQ(w->bt.args.stat.expected, p.stat.expected);
	EXPECT_EQ(w->bt.args.stat.considered, p.stat.considered);
	EXPECT_EQ(w->bt.args.stat.completed, p.stat.completed);
	EXPECT_EQ(1, balance_item_present(w->fd));
	EXPECT_EQ(-ENOTCONN, balance_ctl(w->fd, BTRFS_BALANCE_CTL_PAUSE));
	again = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fd, &again));
	/* Progress copies out only when there is a balance: there is one. */
	EXPECT_EQ(-EFAULT, xioctl(w->fd, BTRFS_IOC_BALANCE_PROGRESS, (void *)1));

	/* Resume: converts what is left, soft, and ends. */
	memset(&r, 0, sizeof(r));
	r.flags = BTRFS_BALANCE_RESUME;
	ASSERT_EQ(0, balance_v2(w->fd, &r));
	EXPECT_EQ(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, r.flags);
	EXPECT_EQ(BTRFS_BALANCE_ARGS_CONVERT | BTRFS_BALANCE_ARGS_SOFT,
		  r.data.flags);
	EXPECT_EQ(left, r.stat.expected);
	EXPECT_EQ(left, r.stat.completed);
	EXPECT_EQ((__u64)paused.n, r.stat.considered);
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	EXPECT_EQ(0, count_data_not(&after, variant->target));
	EXPECT_EQ(-ENOTCONN, balance_progress(w->fd, &p));
	EXPECT_EQ(0, balance_item_present(w->fd));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(live, cancel_stops_and_forgets_the_balance, 180)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	struct chunk_list before, after;

	write_dataset(_metadata, w, LIVE_FILES);
	ASSERT_EQ(0, read_chunks(w->fd, &before));
	convert_request(&a, BTRFS_BALANCE_DATA, variant->target);
	start_running(_metadata, w, &a);
	ASSERT_EQ(0, balance_ctl(w->fd, BTRFS_BALANCE_CTL_CANCEL));
	ASSERT_EQ(-ECANCELED, balance_thread_join(&w->bt));
	EXPECT_EQ(0ULL, w->bt.args.state & BTRFS_BALANCE_STATE_RUNNING);
	EXPECT_EQ(-ENOTCONN, balance_progress(w->fd, &p));
	EXPECT_EQ(0, balance_item_present(w->fd));
	EXPECT_EQ(-ENOTCONN, balance_ctl(w->fd, BTRFS_BALANCE_CTL_CANCEL));
	EXPECT_EQ(-ENOTCONN, balance_ctl(w->fd, BTRFS_BALANCE_CTL_PAUSE));
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	EXPECT_EQ(count_moved(&before, &after), w->bt.args.stat.completed);
	EXPECT_LT(0, count_data_not(&after, variant->target))
		TH_LOG("everything was converted before the cancel");
	/* The exclusive operation is free again. */
	noop_request(&a, BTRFS_BALANCE_DATA);
	EXPECT_EQ(0, balance_v2(w->fd, &a));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(live, exclusive_ops_are_refused_while_running, 180)
{
	struct btrfs_ioctl_balance_args a, again;
	struct world *w = &self->w;
	struct chunk_list after;

	write_dataset(_metadata, w, LIVE_FILES);
	convert_request(&a, BTRFS_BALANCE_DATA, variant->target);
	start_running(_metadata, w, &a);
	/* Arguments that would fail harmlessly if the call got through. */
	EXPECT_EQ(EXCL_BUSY, add_device(w->fd, NO_SUCH_DEV));
	EXPECT_EQ(EXCL_BUSY, remove_devid(w->fd, NO_SUCH_DEVID));
	EXPECT_EQ(EXCL_BUSY, resize(w->fd, "999:max"));
	EXPECT_EQ(EXCL_BUSY, replace(w->fd, NO_SUCH_DEVID, NO_SUCH_DEV));
	again = a;
	EXPECT_EQ(-EINPROGRESS, balance_v2(w->fd, &again));
	ASSERT_EQ(0, balance_thread_join(&w->bt));
	EXPECT_EQ(w->ndevs, fs_num_devices(w->fd));
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	EXPECT_EQ(0, count_data_not(&after, variant->target));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(live, only_device_add_runs_beside_a_paused_balance, 180)
{
	const char *spare = self->w.env.devs[variant->ndevs];
	struct btrfs_ioctl_balance_args a, p, r;
	struct world *w = &self->w;
	struct chunk_list after;
	int ret;

	write_dataset(_metadata, w, LIVE_FILES);
	convert_request(&a, BTRFS_BALANCE_DATA, variant->target);
	start_running(_metadata, w, &a);
	pause_running(_metadata, w);
	EXPECT_EQ(EXCL_BUSY, resize(w->fd, "999:max"));
	EXPECT_EQ(EXCL_BUSY, remove_devid(w->fd, NO_SUCH_DEVID));
	EXPECT_EQ(EXCL_BUSY, replace(w->fd, NO_SUCH_DEVID, NO_SUCH_DEV));
	ret = add_device(w->fd, spare);
	ASSERT_EQ(0, ret) TH_LOG("add %s beside a paused balance", spare);
	w->ndevs++;
	EXPECT_EQ(w->ndevs, fs_num_devices(w->fd));
	/* Still paused, and still exclusive against the others. */
	ASSERT_EQ(0, balance_progress(w->fd, &p));
	EXPECT_EQ(0ULL, p.state & BTRFS_BALANCE_STATE_RUNNING);
	EXPECT_EQ(1, balance_item_present(w->fd));
	EXPECT_EQ(EXCL_BUSY, resize(w->fd, "999:max"));
	memset(&r, 0, sizeof(r));
	r.flags = BTRFS_BALANCE_RESUME;
	ASSERT_EQ(0, balance_v2(w->fd, &r));
	ASSERT_EQ(0, read_chunks(w->fd, &after));
	EXPECT_EQ(0, count_data_not(&after, variant->target));
	EXPECT_EQ(0, balance_item_present(w->fd));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(live, paused_balance_resumes_on_next_mount, 180)
{
	struct btrfs_ioctl_balance_args a;
	struct world *w = &self->w;
	struct chunk_list l;
	int ret;

	write_dataset(_metadata, w, LIVE_FILES);
	convert_request(&a, BTRFS_BALANCE_DATA, variant->target);
	start_running(_metadata, w, &a);
	pause_running(_metadata, w);
	ASSERT_EQ(0, read_chunks(w->fd, &l));
	ASSERT_LT(0, count_data_not(&l, variant->target))
		TH_LOG("everything was converted before the pause");
	EXPECT_EQ(1, balance_item_present(w->fd));
	world_umount(_metadata, w);
	world_mount(_metadata, w, 0, NULL);
	ret = wait_balance_gone(w->fd, 120 * 1000);
	ASSERT_EQ(0, ret) TH_LOG("the resumed balance did not end: %d", ret);
	EXPECT_EQ(0, balance_item_present(w->fd));
	ASSERT_EQ(0, read_chunks(w->fd, &l));
	EXPECT_EQ(0, count_data_not(&l, variant->target));
	verify_dataset(_metadata, w);
}

TEST_F_TIMEOUT(live, unmount_pauses_and_skip_balance_keeps_it_paused, 180)
{
	struct btrfs_ioctl_balance_args a, p;
	struct world *w = &self->w;
	int ret;

	write_dataset(_metadata, w, LIVE_FILES);
	/*
	 * A plain data balance: resumed, it relocates the data chunks under
	 * 90% full, so it has work left whenever it was paused.
	 */
	request(&a, BTRFS_BALANCE_DATA, NULL);
	start_running(_metadata, w, &a);
	pause_running(_metadata, w);
	world_umount(_metadata, w);

	/* A read-write mount resumes it in a kernel thread... */
	world_mount(_metadata, w, 0, NULL);
	ret = wait_balance_running(w->fd, NULL, 60 * 1000);
	ASSERT_EQ(0, ret) TH_LOG("not seen running after mount: %d", ret);
	/* ...which unmount pauses, keeping the item. */
	world_umount(_metadata, w);

	world_mount(_metadata, w, 0, "skip_balance");
	ASSERT_EQ(0, balance_progress(w->fd, &p))
		TH_LOG("no paused balance after unmount");
	EXPECT_EQ(BTRFS_BALANCE_DATA | BTRFS_BALANCE_RESUME, p.flags);
	EXPECT_EQ(1, balance_item_present(w->fd));
	/* Still paused a while later: skip_balance did not resume it. */
	usleep(1000 * 1000);
	ASSERT_EQ(0, balance_progress(w->fd, &p));
	EXPECT_EQ(0ULL, p.state & BTRFS_BALANCE_STATE_RUNNING);

	/* Cancelling the paused balance deletes it, for good. */
	EXPECT_EQ(0, balance_ctl(w->fd, BTRFS_BALANCE_CTL_CANCEL));
	EXPECT_EQ(0, balance_item_present(w->fd));
	EXPECT_EQ(-ENOTCONN, balance_progress(w->fd, &p));
	world_umount(_metadata, w);
	world_mount(_metadata, w, 0, NULL);
	EXPECT_EQ(-ENOTCONN, balance_progress(w->fd, &p));
	EXPECT_EQ(0, balance_item_present(w->fd));
	verify_dataset(_metadata, w);
}

TEST_HARNESS_MAIN
