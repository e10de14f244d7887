// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the decision layer of the btrfs restriper (balance.c).
 *
 * The decision layer takes plain values and returns decisions, so each case
 * is a literal input next to a literal result worked out by hand from the
 * documented semantics.  No expected value is computed by code under test.
 */

#include <kunit/test.h>
#include <linux/errno.h>
#include <linux/string.h>
#include "../misc.h"
#include "../volumes.h"
#include "../balance.h"

/* Shorthands that keep the tables within 80 columns. */
#define B_DATA		BTRFS_BLOCK_GROUP_DATA
#define B_SYS		BTRFS_BLOCK_GROUP_SYSTEM
#define B_META		BTRFS_BLOCK_GROUP_METADATA
#define B_RAID0		BTRFS_BLOCK_GROUP_RAID0
#define B_RAID1		BTRFS_BLOCK_GROUP_RAID1
#define B_DUP		BTRFS_BLOCK_GROUP_DUP
#define B_RAID10	BTRFS_BLOCK_GROUP_RAID10
#define B_RAID5		BTRFS_BLOCK_GROUP_RAID5
#define B_RAID6		BTRFS_BLOCK_GROUP_RAID6
#define B_RAID1C3	BTRFS_BLOCK_GROUP_RAID1C3
#define B_RAID1C4	BTRFS_BLOCK_GROUP_RAID1C4
/* SINGLE in extended format; in chunk format SINGLE is no profile bit. */
#define B_SINGLE	BTRFS_AVAIL_ALLOC_BIT_SINGLE

#define T_DATA		BTRFS_BALANCE_DATA
#define T_SYS		BTRFS_BALANCE_SYSTEM
#define T_META		BTRFS_BALANCE_METADATA
#define T_ALL		(T_DATA | T_SYS | T_META)
#define T_FORCE		BTRFS_BALANCE_FORCE
#define T_RESUME	BTRFS_BALANCE_RESUME

#define A_PROFILES	BTRFS_BALANCE_ARGS_PROFILES
#define A_USAGE		BTRFS_BALANCE_ARGS_USAGE
#define A_DEVID		BTRFS_BALANCE_ARGS_DEVID
#define A_DRANGE	BTRFS_BALANCE_ARGS_DRANGE
#define A_VRANGE	BTRFS_BALANCE_ARGS_VRANGE
#define A_LIMIT		BTRFS_BALANCE_ARGS_LIMIT
#define A_LIMIT_RANGE	BTRFS_BALANCE_ARGS_LIMIT_RANGE
#define A_STRIPES	BTRFS_BALANCE_ARGS_STRIPES_RANGE
#define A_USAGE_RANGE	BTRFS_BALANCE_ARGS_USAGE_RANGE
#define A_CONVERT	BTRFS_BALANCE_ARGS_CONVERT
#define A_SOFT		BTRFS_BALANCE_ARGS_SOFT

#define MIB(n)		((u64)(n) << 20)
#define GIB(n)		((u64)(n) << 30)

#define CONVERT_TO(t)	{ .flags = A_CONVERT, .target = (t) }
#define USAGE_OF(u)	{ .flags = A_USAGE, .usage = (u) }

/* ---------------------------------------------------------------------- */
/* Profiles                                                               */
/* ---------------------------------------------------------------------- */

struct valid_case {
	const char *name;
	u64 flags;
	bool extended;
	bool valid;
};

static const struct valid_case valid_cases[] = {
	{ "chunk: no profile bit is single", 0, false, true },
	{ "extended: no profile bit is no profile", 0, true, false },
	{ "chunk: type bits alone are single", B_DATA | B_META, false, true },
	{ "extended: type bits alone are no profile", B_SYS, true, false },
	{ "chunk: raid1", B_RAID1, false, true },
	{ "extended: raid1", B_RAID1, true, true },
	{ "chunk: metadata raid1c4", B_META | B_RAID1C4, false, true },
	{ "extended: data raid6", B_DATA | B_RAID6, true, true },
	{ "extended: the single bit", B_SINGLE, true, true },
	{ "extended: data single", B_DATA | B_SINGLE, true, true },
	{ "chunk: the single bit is stray", B_SINGLE, false, false },
	{ "chunk: raid0|raid1", B_RAID0 | B_RAID1, false, false },
	{ "extended: dup|raid10", B_DUP | B_RAID10, true, false },
	{ "extended: single|raid1", B_SINGLE | B_RAID1, true, false },
	{ "chunk: stray bit 11", BIT_ULL(11), false, false },
	{ "chunk: raid1 with stray bit 11", B_RAID1 | BIT_ULL(11), false, false },
	{ "extended: raid5 with stray bit 47", B_RAID5 | BIT_ULL(47), true, false },
	{ "extended: stray bit 63", BIT_ULL(63), true, false },
};

static void valid_case_desc(const struct valid_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(valid, valid_cases, valid_case_desc);

static void profile_is_valid_test(struct kunit *test)
{
	const struct valid_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, btrfs_balance_profile_is_valid(p->flags,
							     p->extended),
			p->valid);
}

/* Each profile alone is valid, any two together are not. */
static void profile_is_valid_every_raid_type_test(struct kunit *test)
{
	int i, j;

	for (i = 0; i < BTRFS_NR_RAID_TYPES; i++) {
		const char *name = btrfs_raid_array[i].raid_name;
		u64 chunk = btrfs_raid_array[i].bg_flag;
		u64 ext = chunk_to_extended(chunk);

		KUNIT_EXPECT_TRUE_MSG(test,
				      btrfs_balance_profile_is_valid(chunk, false),
				      "%s", name);
		KUNIT_EXPECT_TRUE_MSG(test,
				      btrfs_balance_profile_is_valid(ext, true),
				      "%s", name);
		for (j = 0; j < BTRFS_NR_RAID_TYPES; j++) {
			u64 two = ext |
				  chunk_to_extended(btrfs_raid_array[j].bg_flag);

			if (i == j)
				continue;
			KUNIT_EXPECT_FALSE_MSG(test,
					       btrfs_balance_profile_is_valid(two, true),
					       "%s|%s", name,
					       btrfs_raid_array[j].raid_name);
		}
	}
}

struct allowed_case {
	u64 num_devices;
	u64 allowed;
};

static const struct allowed_case allowed_cases[] = {
	{ 0, B_SINGLE },
	{ 1, B_SINGLE | B_DUP | B_RAID0 },
	{ 2, B_SINGLE | B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 },
	{ 3, B_SINGLE | B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 |
	     B_RAID6 | B_RAID1C3 },
	{ 4, B_SINGLE | B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 |
	     B_RAID6 | B_RAID1C3 | B_RAID1C4 },
	{ 8, B_SINGLE | B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 |
	     B_RAID6 | B_RAID1C3 | B_RAID1C4 },
};

static void allowed_case_desc(const struct allowed_case *p, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%llu rw devices",
		 p->num_devices);
}

KUNIT_ARRAY_PARAM(allowed, allowed_cases, allowed_case_desc);

static void allowed_targets_test(struct kunit *test)
{
	const struct allowed_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, btrfs_balance_allowed_targets(p->num_devices),
			p->allowed);
}

/* The literal masks above assume the 6.12 devs_min values: check them too. */
static void allowed_targets_follow_devs_min_test(struct kunit *test)
{
	static const u64 devs_min[BTRFS_NR_RAID_TYPES] = {
		[BTRFS_RAID_SINGLE] = 1, [BTRFS_RAID_RAID0] = 1,
		[BTRFS_RAID_DUP] = 1, [BTRFS_RAID_RAID1] = 2,
		[BTRFS_RAID_RAID10] = 2, [BTRFS_RAID_RAID5] = 2,
		[BTRFS_RAID_RAID6] = 3, [BTRFS_RAID_RAID1C3] = 3,
		[BTRFS_RAID_RAID1C4] = 4,
	};
	u64 n;
	int i;

	for (i = 0; i < BTRFS_NR_RAID_TYPES; i++)
		KUNIT_EXPECT_EQ_MSG(test, (u64)btrfs_raid_array[i].devs_min,
				    devs_min[i], "%s",
				    btrfs_raid_array[i].raid_name);

	for (n = 0; n <= 8; n++) {
		u64 allowed = btrfs_balance_allowed_targets(n);

		KUNIT_EXPECT_EQ(test, allowed & B_SINGLE, B_SINGLE);
		KUNIT_EXPECT_EQ(test, allowed & ~BTRFS_EXTENDED_PROFILE_MASK,
				0ULL);
		for (i = 0; i < BTRFS_NR_RAID_TYPES; i++) {
			u64 bg = btrfs_raid_array[i].bg_flag;

			if (!bg)
				continue;
			KUNIT_EXPECT_EQ_MSG(test, !!(allowed & bg),
					    n >= btrfs_raid_array[i].devs_min,
					    "%s on %llu devices",
					    btrfs_raid_array[i].raid_name, n);
		}
	}
}

/*
 * A balance that converts is "running" while it relocates and "paused" when
 * it was interrupted: fs_info keeps the control in both cases, and a paused
 * one carries RESUME, SOFT and some progress.  NO_BALANCE means no control.
 */
enum bctl_state { NO_BALANCE, RUNNING, PAUSED };

struct profile_case {
	const char *name;
	enum bctl_state state;
	/* Extended convert targets, 0 when that type does not convert. */
	u64 data_target;
	u64 meta_target;
	u64 sys_target;
	u64 flags;
	u64 num_devices;
	u64 expected;
};

static void init_type_args(struct btrfs_balance_args *bargs, u64 target,
			   enum bctl_state state)
{
	if (!target) {
		bargs->flags = A_USAGE;
		bargs->usage = 50;
		return;
	}
	bargs->flags = A_CONVERT;
	if (state == PAUSED)
		bargs->flags |= A_SOFT;
	bargs->target = target;
}

static const struct btrfs_balance_control *
init_bctl(struct btrfs_balance_control *bctl, const struct profile_case *p)
{
	if (p->state == NO_BALANCE)
		return NULL;
	memset(bctl, 0, sizeof(*bctl));
	bctl->flags = T_ALL;
	init_type_args(&bctl->data, p->data_target, p->state);
	init_type_args(&bctl->meta, p->meta_target, p->state);
	init_type_args(&bctl->sys, p->sys_target, p->state);
	if (p->state == PAUSED) {
		bctl->flags |= T_RESUME;
		bctl->stat.expected = 10;
		bctl->stat.considered = 4;
		bctl->stat.completed = 3;
	}
	return bctl;
}

static const struct profile_case restripe_cases[] = {
	{ "no balance", NO_BALANCE, 0, 0, 0, B_DATA, 0, 0 },
	{ "balance without convert", RUNNING, 0, 0, 0, B_META, 0, 0 },
	{ "data to raid1, running", RUNNING, B_RAID1, 0, 0,
	  B_DATA, 0, B_DATA | B_RAID1 },
	{ "data to raid1, paused", PAUSED, B_RAID1, 0, 0,
	  B_DATA, 0, B_DATA | B_RAID1 },
	{ "data to single keeps the single bit", RUNNING, B_SINGLE, 0, 0,
	  B_DATA, 0, B_DATA | B_SINGLE },
	{ "data converts, metadata asked", RUNNING, B_RAID1, 0, 0,
	  B_META, 0, 0 },
	{ "metadata to dup, running", RUNNING, 0, B_DUP, 0,
	  B_META, 0, B_META | B_DUP },
	{ "metadata to raid10, paused, type with profiles", PAUSED,
	  0, B_RAID10, 0, B_META | B_RAID1 | B_DUP, 0, B_META | B_RAID10 },
	{ "system to raid1c3, running", RUNNING, 0, 0, B_RAID1C3,
	  B_SYS, 0, B_SYS | B_RAID1C3 },
	{ "system to single, paused", PAUSED, 0, 0, B_SINGLE,
	  B_SYS, 0, B_SYS | B_SINGLE },
	{ "system converts, metadata asked", RUNNING, 0, 0, B_DUP,
	  B_META, 0, 0 },
	{ "metadata and system convert, system asked", RUNNING,
	  0, B_RAID1, B_DUP, B_SYS, 0, B_SYS | B_DUP },
	{ "mixed, both convert: data wins", RUNNING, B_RAID0, B_RAID1, 0,
	  B_DATA | B_META, 0, B_DATA | B_RAID0 },
	{ "mixed, only metadata converts", RUNNING, 0, B_RAID1, 0,
	  B_DATA | B_META, 0, B_META | B_RAID1 },
};

static void profile_case_desc(const struct profile_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(restripe, restripe_cases, profile_case_desc);

static void restripe_target_test(struct kunit *test)
{
	const struct profile_case *p = test->param_value;
	struct btrfs_balance_control bctl;

	KUNIT_EXPECT_EQ(test,
			btrfs_balance_restripe_target(init_bctl(&bctl, p),
						      p->flags),
			p->expected);
}

/* @flags: the type and the profiles available for it (extended format). */
static const struct profile_case alloc_cases[] = {
	{ "data to raid1, running", RUNNING, B_RAID1, 0, 0,
	  B_DATA | B_SINGLE | B_RAID0, 2, B_DATA | B_RAID1 },
	{ "data to raid1, paused", PAUSED, B_RAID1, 0, 0,
	  B_DATA | B_SINGLE | B_RAID0, 2, B_DATA | B_RAID1 },
	{ "data to single drops the single bit", RUNNING, B_SINGLE, 0, 0,
	  B_DATA | B_RAID1, 2, B_DATA },
	{ "data target wins over the device count", RUNNING, B_RAID1C4, 0, 0,
	  B_DATA | B_SINGLE, 1, B_DATA | B_RAID1C4 },
	{ "data, no balance: raid0 over single", NO_BALANCE, 0, 0, 0,
	  B_DATA | B_SINGLE | B_RAID0, 2, B_DATA | B_RAID0 },
	{ "metadata to dup, running", RUNNING, 0, B_DUP, 0,
	  B_META | B_RAID1, 2, B_META | B_DUP },
	{ "metadata to raid1c3, paused", PAUSED, 0, B_RAID1C3, 0,
	  B_META | B_DUP, 3, B_META | B_RAID1C3 },
	{ "metadata, no balance: raid1 over dup", NO_BALANCE, 0, 0, 0,
	  B_META | B_DUP | B_RAID1, 2, B_META | B_RAID1 },
	{ "metadata, no balance: raid1 needs 2 devices", NO_BALANCE, 0, 0, 0,
	  B_META | B_DUP | B_RAID1, 1, B_META | B_DUP },
	{ "metadata, data converting: reduced", RUNNING, B_RAID0, 0, 0,
	  B_META | B_DUP | B_RAID1, 2, B_META | B_RAID1 },
	{ "system to raid1c4, running", RUNNING, 0, 0, B_RAID1C4,
	  B_SYS | B_RAID1, 4, B_SYS | B_RAID1C4 },
	{ "system to single, paused", PAUSED, 0, 0, B_SINGLE,
	  B_SYS | B_DUP, 1, B_SYS },
	{ "system, no balance: raid1c3 over raid1", NO_BALANCE, 0, 0, 0,
	  B_SYS | B_RAID1 | B_RAID1C3, 3, B_SYS | B_RAID1C3 },
	{ "system, no balance: raid1c3 needs 3 devices", NO_BALANCE, 0, 0, 0,
	  B_SYS | B_RAID1 | B_RAID1C3, 2, B_SYS | B_RAID1 },
	{ "system, no balance: only single", NO_BALANCE, 0, 0, 0,
	  B_SYS | B_SINGLE, 4, B_SYS },
	{ "all profiles on 4 devices: raid1c4", NO_BALANCE, 0, 0, 0,
	  B_DATA | BTRFS_EXTENDED_PROFILE_MASK, 4, B_DATA | B_RAID1C4 },
	{ "all profiles on 3 devices: raid6", NO_BALANCE, 0, 0, 0,
	  B_DATA | BTRFS_EXTENDED_PROFILE_MASK, 3, B_DATA | B_RAID6 },
	{ "all profiles on 2 devices: raid5", NO_BALANCE, 0, 0, 0,
	  B_DATA | BTRFS_EXTENDED_PROFILE_MASK, 2, B_DATA | B_RAID5 },
	{ "all profiles on 1 device: dup", NO_BALANCE, 0, 0, 0,
	  B_DATA | BTRFS_EXTENDED_PROFILE_MASK, 1, B_DATA | B_DUP },
	{ "raid10 over raid1 and raid0", NO_BALANCE, 0, 0, 0,
	  B_DATA | B_RAID10 | B_RAID1 | B_RAID0, 2, B_DATA | B_RAID10 },
	{ "raid6 and raid1c3 need 3 devices", NO_BALANCE, 0, 0, 0,
	  B_DATA | B_RAID6 | B_RAID1C3 | B_RAID0, 2, B_DATA | B_RAID0 },
};

KUNIT_ARRAY_PARAM(alloc, alloc_cases, profile_case_desc);

static void alloc_profile_test(struct kunit *test)
{
	const struct profile_case *p = test->param_value;
	struct btrfs_balance_control bctl;

	KUNIT_EXPECT_EQ(test,
			btrfs_balance_alloc_profile(init_bctl(&bctl, p),
						    p->flags, p->num_devices),
			p->expected);
}

static struct kunit_case balance_profiles_cases[] = {
	KUNIT_CASE_PARAM(profile_is_valid_test, valid_gen_params),
	KUNIT_CASE(profile_is_valid_every_raid_type_test),
	KUNIT_CASE_PARAM(allowed_targets_test, allowed_gen_params),
	KUNIT_CASE(allowed_targets_follow_devs_min_test),
	KUNIT_CASE_PARAM(restripe_target_test, restripe_gen_params),
	KUNIT_CASE_PARAM(alloc_profile_test, alloc_gen_params),
	{}
};

static struct kunit_suite balance_profiles_suite = {
	.name = "btrfs_balance_profiles",
	.test_cases = balance_profiles_cases,
};

/* ---------------------------------------------------------------------- */
/* Filters and limits                                                     */
/* ---------------------------------------------------------------------- */

enum which_args { NO_ARGS, DATA_ARGS, META_ARGS, SYS_ARGS };

struct chunk_args_case {
	const char *name;
	u64 bctl_flags;
	u64 chunk_type;
	enum which_args which;
};

static const struct chunk_args_case chunk_args_cases[] = {
	{ "data chunk, data selected", T_DATA, B_DATA, DATA_ARGS },
	{ "metadata chunk, data selected", T_DATA, B_META, NO_ARGS },
	{ "metadata chunk, metadata selected", T_META, B_META | B_RAID1,
	  META_ARGS },
	{ "system chunk, system selected", T_SYS, B_SYS | B_DUP, SYS_ARGS },
	{ "metadata chunk, system selected", T_SYS, B_META, NO_ARGS },
	{ "system chunk, all selected", T_ALL, B_SYS, SYS_ARGS },
	/* A mixed chunk takes the data args whichever type selected it. */
	{ "mixed chunk, metadata selected", T_META, B_DATA | B_META,
	  DATA_ARGS },
	{ "mixed chunk, system selected", T_SYS, B_DATA | B_META, NO_ARGS },
	{ "mixed chunk, data selected", T_DATA, B_DATA | B_META, DATA_ARGS },
	{ "mixed chunk, both selected", T_DATA | T_META, B_DATA | B_META,
	  DATA_ARGS },
	{ "force and resume select nothing", T_FORCE | T_RESUME, B_DATA,
	  NO_ARGS },
};

static void chunk_args_case_desc(const struct chunk_args_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(chunk_args, chunk_args_cases, chunk_args_case_desc);

static void args_for_chunk_test(struct kunit *test)
{
	const struct chunk_args_case *p = test->param_value;
	const struct btrfs_balance_args *expected = NULL;
	struct btrfs_balance_control bctl = { .flags = p->bctl_flags };

	if (p->which == DATA_ARGS)
		expected = &bctl.data;
	else if (p->which == META_ARGS)
		expected = &bctl.meta;
	else if (p->which == SYS_ARGS)
		expected = &bctl.sys;
	KUNIT_EXPECT_PTR_EQ(test,
			    btrfs_balance_args_for_chunk(&bctl, p->chunk_type),
			    expected);
}

struct filter_case {
	const char *name;
	struct btrfs_balance_args args;
	u64 type;
	u64 start;
	u64 length;
	u64 used;
	u32 num_stripes;
	struct btrfs_balance_stripe stripes[4];
	bool pass;
};

static void filter_case_desc(const struct filter_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

static void run_filter_case(struct kunit *test,
			    bool (*filter)(const struct btrfs_balance_args *bargs,
					   const struct btrfs_balance_chunk *chunk))
{
	const struct filter_case *p = test->param_value;
	const struct btrfs_balance_chunk chunk = {
		.type = p->type,
		.start = p->start,
		.length = p->length,
		.used = p->used,
		.num_stripes = p->num_stripes,
		.stripes = p->stripes,
	};

	KUNIT_EXPECT_EQ(test, filter(&p->args, &chunk), p->pass);
}

#define PROFILES_CASE(_name, _profiles, _type, _pass)			\
	{ .name = _name, .type = _type, .length = GIB(1), .pass = _pass,\
	  .args = { .flags = A_PROFILES, .profiles = _profiles } }

static const struct filter_case profiles_cases[] = {
	PROFILES_CASE("single matches a single chunk", B_SINGLE, B_DATA,
		      true),
	PROFILES_CASE("single misses a raid1 chunk", B_SINGLE,
		      B_DATA | B_RAID1, false),
	PROFILES_CASE("raid1|raid10 matches raid10", B_RAID1 | B_RAID10,
		      B_META | B_RAID10, true),
	PROFILES_CASE("raid1 misses raid1c3", B_RAID1, B_META | B_RAID1C3,
		      false),
	PROFILES_CASE("no profile matches nothing", 0, B_DATA, false),
	PROFILES_CASE("a type bit is not a profile", B_META, B_META, false),
};

KUNIT_ARRAY_PARAM(profiles, profiles_cases, filter_case_desc);

static void filter_profiles_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_profiles);
}

/* 1GiB = 1073741824; N% of it rounds down: 1% = 10737418, 99% = 1063004405. */
#define USAGE_CASE(_name, _usage, _length, _used, _pass)		\
	{ .name = _name, .type = B_DATA, .length = _length,		\
	  .used = _used, .pass = _pass,					\
	  .args = { .flags = A_USAGE, .usage = _usage } }

static const struct filter_case usage_cases[] = {
	USAGE_CASE("0: empty passes", 0, GIB(1), 0, true),
	USAGE_CASE("0: one byte fails", 0, GIB(1), 1, false),
	USAGE_CASE("1: 10737417 passes", 1, GIB(1), 10737417, true),
	USAGE_CASE("1: 10737418 fails", 1, GIB(1), 10737418, false),
	USAGE_CASE("1 of 150 bytes: 0 passes", 1, 150, 0, true),
	USAGE_CASE("1 of 150 bytes: 1 fails", 1, 150, 1, false),
	USAGE_CASE("50: half minus one passes", 50, GIB(1), 536870911, true),
	USAGE_CASE("50: half fails", 50, GIB(1), 536870912, false),
	USAGE_CASE("99: 1063004404 passes", 99, GIB(1), 1063004404, true),
	USAGE_CASE("99: 1063004405 fails", 99, GIB(1), 1063004405, false),
	USAGE_CASE("100: full minus one passes", 100, GIB(1), 1073741823,
		   true),
	USAGE_CASE("100: full fails", 100, GIB(1), 1073741824, false),
	USAGE_CASE("101: full minus one passes", 101, GIB(1), 1073741823,
		   true),
	USAGE_CASE("101: full fails", 101, GIB(1), 1073741824, false),
	USAGE_CASE("1000: full fails", 1000, GIB(1), 1073741824, false),
};

KUNIT_ARRAY_PARAM(usage, usage_cases, filter_case_desc);

static void filter_usage_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_usage);
}

/* 1GiB: 10% = 107374182, 50% = 536870912. */
#define RANGE_CASE(_name, _min, _max, _used, _pass)			\
	{ .name = _name, .type = B_DATA, .length = GIB(1),		\
	  .used = _used, .pass = _pass,					\
	  .args = { .flags = A_USAGE_RANGE, .usage_min = _min,		\
		    .usage_max = _max } }

static const struct filter_case usage_range_cases[] = {
	RANGE_CASE("0..0: empty passes", 0, 0, 0, true),
	RANGE_CASE("0..0: one byte fails", 0, 0, 1, false),
	RANGE_CASE("0..50: empty passes", 0, 50, 0, true),
	RANGE_CASE("0..50: half minus one passes", 0, 50, 536870911, true),
	RANGE_CASE("0..50: half fails", 0, 50, 536870912, false),
	RANGE_CASE("10..50: below 10% fails", 10, 50, 107374181, false),
	RANGE_CASE("10..50: 10% passes", 10, 50, 107374182, true),
	RANGE_CASE("50..100: below half fails", 50, 100, 536870911, false),
	RANGE_CASE("50..100: half passes", 50, 100, 536870912, true),
	RANGE_CASE("50..100: full minus one passes", 50, 100, 1073741823,
		   true),
	RANGE_CASE("50..100: full fails", 50, 100, 1073741824, false),
	RANGE_CASE("50..101: full minus one passes", 50, 101, 1073741823,
		   true),
	RANGE_CASE("50..101: full fails", 50, 101, 1073741824, false),
	RANGE_CASE("1..99: 10737417 fails", 1, 99, 10737417, false),
	RANGE_CASE("1..99: 10737418 passes", 1, 99, 10737418, true),
	RANGE_CASE("1..99: 1063004404 passes", 1, 99, 1063004404, true),
	RANGE_CASE("1..99: 1063004405 fails", 1, 99, 1063004405, false),
	RANGE_CASE("50..50: empty range", 50, 50, 536870912, false),
};

KUNIT_ARRAY_PARAM(usage_range, usage_range_cases, filter_case_desc);

static void filter_usage_range_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_usage_range);
}

#define RAID1_ON_1_AND_3						\
	.type = B_DATA | B_RAID1, .length = GIB(1), .num_stripes = 2,	\
	.stripes = { { 1, GIB(1) }, { 3, GIB(2) } }
#define RAID10_ON_1_TO_4						\
	.type = B_DATA | B_RAID10, .length = GIB(1), .num_stripes = 4,	\
	.stripes = { { 1, 0 }, { 2, 0 }, { 3, 0 }, { 4, 0 } }

#define DEVID_CASE(_name, _devid, _pass, _chunk)			\
	{ .name = _name, .args = { .flags = A_DEVID, .devid = _devid },	\
	  .pass = _pass, _chunk }

static const struct filter_case devid_cases[] = {
	DEVID_CASE("raid1: first stripe's device", 1, true,
		   RAID1_ON_1_AND_3),
	DEVID_CASE("raid1: second stripe's device", 3, true,
		   RAID1_ON_1_AND_3),
	DEVID_CASE("raid1: device in between", 2, false, RAID1_ON_1_AND_3),
	DEVID_CASE("raid10: last stripe's device", 4, true, RAID10_ON_1_TO_4),
	DEVID_CASE("raid10: device past the stripes", 5, false,
		   RAID10_ON_1_TO_4),
};

KUNIT_ARRAY_PARAM(devid, devid_cases, filter_case_desc);

static void filter_devid_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_devid);
}

/*
 * Stripe lengths of a 1GiB chunk, (num_stripes - nparity) / ncopies data
 * stripes: single 1GiB, dup x2 1GiB, raid1 x2 1GiB, raid1c3 x3 1GiB,
 * raid0 x4 256MiB, raid10 x4 512MiB, raid5 x3 512MiB, raid6 x4 512MiB.
 */
#define DRANGE_CASE(_name, _dev, _start, _end, _pass, _chunk)		\
	{ .name = _name, .pass = _pass, _chunk,				\
	  .args = { .flags = A_DEVID | A_DRANGE, .devid = _dev,		\
		    .pstart = _start, .pend = _end } }
#define SINGLE_AT_4G							\
	.type = B_DATA, .length = GIB(1), .num_stripes = 1,		\
	.stripes = { { 1, GIB(4) } }
#define DUP_AT_1G_3G							\
	.type = B_META | B_DUP, .length = GIB(1), .num_stripes = 2,	\
	.stripes = { { 1, GIB(1) }, { 1, GIB(3) } }
#define RAID1_AT_5G_9G							\
	.type = B_DATA | B_RAID1, .length = GIB(1), .num_stripes = 2,	\
	.stripes = { { 1, GIB(5) }, { 2, GIB(9) } }
#define RAID1C3_AT_7G							\
	.type = B_SYS | B_RAID1C3, .length = GIB(1), .num_stripes = 3,	\
	.stripes = { { 1, 0 }, { 2, 0 }, { 3, GIB(7) } }
#define RAID0_AT_10G							\
	.type = B_DATA | B_RAID0, .length = GIB(1), .num_stripes = 4,	\
	.stripes = { { 1, GIB(10) }, { 2, GIB(10) }, { 3, GIB(10) },	\
		     { 4, GIB(10) } }
#define RAID10_AT_8G							\
	.type = B_DATA | B_RAID10, .length = GIB(1), .num_stripes = 4,	\
	.stripes = { { 1, 0 }, { 2, GIB(8) }, { 3, 0 }, { 4, 0 } }
#define RAID5_AT_6G							\
	.type = B_DATA | B_RAID5, .length = GIB(1), .num_stripes = 3,	\
	.stripes = { { 1, 0 }, { 2, 0 }, { 3, GIB(6) } }
#define RAID6_AT_2G							\
	.type = B_DATA | B_RAID6, .length = GIB(1), .num_stripes = 4,	\
	.stripes = { { 1, 0 }, { 2, 0 }, { 3, 0 }, { 4, GIB(2) } }

static const struct filter_case drange_cases[] = {
	{ .name = "no devid flag: everything", .pass = true, SINGLE_AT_4G,
	  .args = { .flags = A_DRANGE, .devid = 9, .pstart = 0, .pend = 1 } },
	DRANGE_CASE("single: stripe ends at pstart", 1, GIB(5), GIB(6),
		    false, SINGLE_AT_4G),
	DRANGE_CASE("single: last byte at pstart", 1, GIB(5) - 1, GIB(6),
		    true, SINGLE_AT_4G),
	DRANGE_CASE("single: stripe starts at pend", 1, GIB(3), GIB(4),
		    false, SINGLE_AT_4G),
	DRANGE_CASE("single: first byte before pend", 1, GIB(3), GIB(4) + 1,
		    true, SINGLE_AT_4G),
	DRANGE_CASE("single: range inside the stripe", 1, GIB(4) + MIB(1),
		    GIB(4) + MIB(2), true, SINGLE_AT_4G),
	DRANGE_CASE("single: overlap on another devid", 2, GIB(4), GIB(5),
		    false, SINGLE_AT_4G),
	DRANGE_CASE("dup: range between the copies", 1, GIB(2), GIB(3),
		    false, DUP_AT_1G_3G),
	DRANGE_CASE("dup: first byte of the second copy", 1, GIB(2),
		    GIB(3) + 1, true, DUP_AT_1G_3G),
	DRANGE_CASE("raid1: 1GiB stripe ends at pstart", 2, GIB(10), GIB(11),
		    false, RAID1_AT_5G_9G),
	DRANGE_CASE("raid1: last byte of 1GiB stripe", 2, GIB(10) - 1,
		    GIB(11), true, RAID1_AT_5G_9G),
	DRANGE_CASE("raid1: only the other devid overlaps", 2, GIB(5), GIB(6),
		    false, RAID1_AT_5G_9G),
	DRANGE_CASE("raid1c3: 1GiB stripe ends at pstart", 3, GIB(8), GIB(9),
		    false, RAID1C3_AT_7G),
	DRANGE_CASE("raid1c3: last byte of 1GiB stripe", 3, GIB(8) - 1,
		    GIB(9), true, RAID1C3_AT_7G),
	DRANGE_CASE("raid0 x4: 256MiB stripe ends at pstart", 3,
		    GIB(10) + MIB(256), GIB(11), false, RAID0_AT_10G),
	DRANGE_CASE("raid0 x4: last byte of 256MiB stripe", 3,
		    GIB(10) + MIB(256) - 1, GIB(11), true, RAID0_AT_10G),
	DRANGE_CASE("raid10 x4: 512MiB stripe ends at pstart", 2,
		    GIB(8) + MIB(512), GIB(9), false, RAID10_AT_8G),
	DRANGE_CASE("raid10 x4: last byte of 512MiB stripe", 2,
		    GIB(8) + MIB(512) - 1, GIB(9), true, RAID10_AT_8G),
	DRANGE_CASE("raid5 x3: 512MiB stripe ends at pstart", 3,
		    GIB(6) + MIB(512), GIB(7), false, RAID5_AT_6G),
	DRANGE_CASE("raid5 x3: last byte of 512MiB stripe", 3,
		    GIB(6) + MIB(512) - 1, GIB(7), true, RAID5_AT_6G),
	DRANGE_CASE("raid6 x4: 512MiB stripe ends at pstart", 4,
		    GIB(2) + MIB(512), GIB(3), false, RAID6_AT_2G),
	DRANGE_CASE("raid6 x4: last byte of 512MiB stripe", 4,
		    GIB(2) + MIB(512) - 1, GIB(3), true, RAID6_AT_2G),
};

KUNIT_ARRAY_PARAM(drange, drange_cases, filter_case_desc);

static void filter_drange_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_drange);
}

/* The chunk covers [10GiB, 11GiB). */
#define VRANGE_CASE(_name, _start, _end, _pass)				\
	{ .name = _name, .type = B_DATA, .start = GIB(10),		\
	  .length = GIB(1), .pass = _pass,				\
	  .args = { .flags = A_VRANGE, .vstart = _start, .vend = _end } }

static const struct filter_case vrange_cases[] = {
	VRANGE_CASE("chunk ends at vstart", GIB(11), GIB(12), false),
	VRANGE_CASE("last byte at vstart", GIB(11) - 1, GIB(12), true),
	VRANGE_CASE("chunk starts at vend", GIB(9), GIB(10), false),
	VRANGE_CASE("first byte before vend", GIB(9), GIB(10) + 1, true),
	VRANGE_CASE("range inside the chunk", GIB(10) + 1, GIB(10) + 2, true),
	VRANGE_CASE("whole address space", 0, U64_MAX, true),
};

KUNIT_ARRAY_PARAM(vrange, vrange_cases, filter_case_desc);

static void filter_vrange_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_vrange);
}

/* A three stripe chunk. */
#define STRIPES_CASE(_name, _min, _max, _pass)				\
	{ .name = _name, .type = B_SYS | B_RAID1C3, .length = GIB(1),	\
	  .num_stripes = 3, .pass = _pass,				\
	  .args = { .flags = A_STRIPES, .stripes_min = _min,		\
		    .stripes_max = _max } }

static const struct filter_case stripes_cases[] = {
	STRIPES_CASE("3..3", 3, 3, true),
	STRIPES_CASE("2..3", 2, 3, true),
	STRIPES_CASE("3..4", 3, 4, true),
	STRIPES_CASE("1..2", 1, 2, false),
	STRIPES_CASE("4..8", 4, 8, false),
	STRIPES_CASE("0..0", 0, 0, false),
};

KUNIT_ARRAY_PARAM(stripes, stripes_cases, filter_case_desc);

static void filter_stripes_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_stripes);
}

#define SOFT_CASE(_name, _flags, _target, _type, _pass)			\
	{ .name = _name, .type = _type, .length = GIB(1), .pass = _pass,\
	  .args = { .flags = _flags, .target = _target } }

static const struct filter_case soft_cases[] = {
	SOFT_CASE("no convert: raid1 chunk, raid1 target", A_SOFT, B_RAID1,
		  B_DATA | B_RAID1, true),
	SOFT_CASE("single chunk already single", A_CONVERT | A_SOFT,
		  B_SINGLE, B_DATA, false),
	SOFT_CASE("raid1 chunk to single", A_CONVERT | A_SOFT, B_SINGLE,
		  B_DATA | B_RAID1, true),
	SOFT_CASE("raid1 chunk already raid1", A_CONVERT | A_SOFT, B_RAID1,
		  B_DATA | B_RAID1, false),
	SOFT_CASE("raid1 chunk to raid10", A_CONVERT | A_SOFT, B_RAID10,
		  B_META | B_RAID1, true),
	SOFT_CASE("single chunk to raid1", A_CONVERT | A_SOFT, B_RAID1,
		  B_DATA, true),
	SOFT_CASE("system dup chunk already dup", A_CONVERT | A_SOFT, B_DUP,
		  B_SYS | B_DUP, false),
};

KUNIT_ARRAY_PARAM(soft, soft_cases, filter_case_desc);

static void filter_soft_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_filter_soft);
}

/*
 * A data raid1 chunk at [10GiB, 11GiB), half used (536870912 bytes), with
 * 1GiB stripes on devid 1 at 1GiB and on devid 2 at 2GiB.
 */
#define COMBO(_name, _pass, ...)					\
	{ .name = _name, .pass = _pass, .args = { __VA_ARGS__ },	\
	  .type = B_DATA | B_RAID1, .start = GIB(10), .length = GIB(1),	\
	  .used = 536870912, .num_stripes = 2,				\
	  .stripes = { { 1, GIB(1) }, { 2, GIB(2) } } }
/* usage_min == usage_max == 10 whatever the byte order: an empty range. */
#define USAGE_10_10	((10ULL << 32) | 10)

static const struct filter_case combo_cases[] = {
	COMBO("no flags: values are ignored", true, .usage = 0, .devid = 9,
	      .stripes_min = 5, .stripes_max = 6),
	COMBO("profiles raid1", true, .flags = A_PROFILES,
	      .profiles = B_RAID1),
	COMBO("profiles single|dup", false, .flags = A_PROFILES,
	      .profiles = B_SINGLE | B_DUP),
	COMBO("usage=60", true, .flags = A_USAGE, .usage = 60),
	COMBO("usage=50", false, .flags = A_USAGE, .usage = 50),
	COMBO("usage=40..60", true, .flags = A_USAGE_RANGE,
	      .usage_min = 40, .usage_max = 60),
	COMBO("usage=60..70", false, .flags = A_USAGE_RANGE,
	      .usage_min = 60, .usage_max = 70),
	COMBO("usage and usage range: only usage applies", true,
	      .flags = A_USAGE | A_USAGE_RANGE, .usage = USAGE_10_10),
	COMBO("the same value as a range alone", false,
	      .flags = A_USAGE_RANGE, .usage = USAGE_10_10),
	COMBO("devid=2", true, .flags = A_DEVID, .devid = 2),
	COMBO("devid=3", false, .flags = A_DEVID, .devid = 3),
	COMBO("drange on devid 2, last byte", true,
	      .flags = A_DEVID | A_DRANGE, .devid = 2,
	      .pstart = GIB(3) - 1, .pend = GIB(4)),
	COMBO("drange on devid 2, after the stripe", false,
	      .flags = A_DEVID | A_DRANGE, .devid = 2,
	      .pstart = GIB(3), .pend = GIB(4)),
	COMBO("drange without the devid flag", true, .flags = A_DRANGE,
	      .devid = 2, .pstart = GIB(3), .pend = GIB(4)),
	COMBO("vrange after the chunk", false, .flags = A_VRANGE,
	      .vstart = GIB(11), .vend = GIB(12)),
	COMBO("vrange over the first byte", true, .flags = A_VRANGE,
	      .vstart = 0, .vend = GIB(10) + 1),
	COMBO("stripes=2..2", true, .flags = A_STRIPES, .stripes_min = 2,
	      .stripes_max = 2),
	COMBO("stripes=3..4", false, .flags = A_STRIPES, .stripes_min = 3,
	      .stripes_max = 4),
	COMBO("soft without convert", true, .flags = A_SOFT,
	      .target = B_RAID1),
	COMBO("convert,soft to raid1", false, .flags = A_CONVERT | A_SOFT,
	      .target = B_RAID1),
	COMBO("convert to raid1 without soft", true, .flags = A_CONVERT,
	      .target = B_RAID1),
	COMBO("limit=0 is not applied here", true, .flags = A_LIMIT,
	      .limit = 0),
	COMBO("limit=5..0 is not applied here", true,
	      .flags = A_LIMIT_RANGE, .limit_min = 5, .limit_max = 0),
	COMBO("every filter passes", true,
	      .flags = A_PROFILES | A_USAGE | A_DEVID | A_DRANGE | A_VRANGE |
		       A_STRIPES | A_CONVERT | A_SOFT,
	      .profiles = B_RAID1, .usage = 60, .devid = 2,
	      .pstart = GIB(2), .pend = GIB(3), .vstart = GIB(10),
	      .vend = GIB(11), .stripes_min = 2, .stripes_max = 2,
	      .target = B_RAID10),
	COMBO("every filter passes but stripes", false,
	      .flags = A_PROFILES | A_USAGE | A_DEVID | A_DRANGE | A_VRANGE |
		       A_STRIPES | A_CONVERT | A_SOFT,
	      .profiles = B_RAID1, .usage = 60, .devid = 2,
	      .pstart = GIB(2), .pend = GIB(3), .vstart = GIB(10),
	      .vend = GIB(11), .stripes_min = 3, .stripes_max = 3,
	      .target = B_RAID10),
};

KUNIT_ARRAY_PARAM(combo, combo_cases, filter_case_desc);

static void chunk_passes_filters_test(struct kunit *test)
{
	run_filter_case(test, btrfs_balance_chunk_passes_filters);
}

struct limit_case {
	const char *name;
	struct btrfs_balance_args args;
	u64 count;
	bool expected;
};

static void limit_case_desc(const struct limit_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

/* limit_min == limit_max == 2 whatever the byte order. */
#define LIMIT_2_2	((2ULL << 32) | 2)

static const struct limit_case limit_cases[] = {
	{ "no flag: no cap", { .limit = 0 }, 1000, true },
	{ "limit=3: first", { .flags = A_LIMIT, .limit = 3 }, 0, true },
	{ "limit=3: third", { .flags = A_LIMIT, .limit = 3 }, 2, true },
	{ "limit=3: fourth", { .flags = A_LIMIT, .limit = 3 }, 3, false },
	{ "limit=3: past it", { .flags = A_LIMIT, .limit = 3 }, 4, false },
	{ "limit=0: nothing", { .flags = A_LIMIT, .limit = 0 }, 0, false },
	{ "limit=1..2: second", { .flags = A_LIMIT_RANGE, .limit_min = 1,
	  .limit_max = 2 }, 1, true },
	{ "limit=1..2: third", { .flags = A_LIMIT_RANGE, .limit_min = 1,
	  .limit_max = 2 }, 2, false },
	{ "limit=5..2: min is not a cap", { .flags = A_LIMIT_RANGE,
	  .limit_min = 5, .limit_max = 2 }, 1, true },
	{ "limit=0..0: nothing", { .flags = A_LIMIT_RANGE }, 0, false },
	{ "limit and limit range: limit applies",
	  { .flags = A_LIMIT | A_LIMIT_RANGE, .limit = LIMIT_2_2 }, 3, true },
};

KUNIT_ARRAY_PARAM(limit, limit_cases, limit_case_desc);

static void limit_allows_test(struct kunit *test)
{
	const struct limit_case *p = test->param_value;
	struct btrfs_balance_args args = p->args;

	KUNIT_EXPECT_EQ(test, btrfs_balance_limit_allows(&args, p->count),
			p->expected);
	/* The args are not a counter: asking again gives the same answer. */
	KUNIT_EXPECT_EQ(test, btrfs_balance_limit_allows(&args, p->count),
			p->expected);
	KUNIT_EXPECT_MEMEQ(test, &args, &p->args, sizeof(args));
}

/* Count chunks the way a balance pass does; the args stay as they were. */
static void limit_counts_without_mutating_args_test(struct kunit *test)
{
	struct btrfs_balance_args args = { .flags = A_LIMIT, .limit = 3 };
	struct btrfs_balance_args saved = args;
	u64 taken = 0;
	int i;

	for (i = 0; i < 10; i++)
		if (btrfs_balance_limit_allows(&args, taken))
			taken++;
	KUNIT_EXPECT_EQ(test, taken, 3ULL);
	KUNIT_EXPECT_MEMEQ(test, &args, &saved, sizeof(args));

	args = (struct btrfs_balance_args){ .flags = A_LIMIT_RANGE,
					    .limit_min = 2, .limit_max = 4 };
	saved = args;
	for (taken = 0, i = 0; i < 10; i++)
		if (btrfs_balance_limit_allows(&args, taken))
			taken++;
	KUNIT_EXPECT_EQ(test, taken, 4ULL);
	KUNIT_EXPECT_MEMEQ(test, &args, &saved, sizeof(args));
}

static const struct limit_case limit_min_cases[] = {
	{ "limit=2..5: 1 selected", { .flags = A_LIMIT_RANGE,
	  .limit_min = 2, .limit_max = 5 }, 1, false },
	{ "limit=2..5: 2 selected", { .flags = A_LIMIT_RANGE,
	  .limit_min = 2, .limit_max = 5 }, 2, true },
	{ "limit=2..5: 6 selected", { .flags = A_LIMIT_RANGE,
	  .limit_min = 2, .limit_max = 5 }, 6, true },
	{ "limit=0..5: nothing selected", { .flags = A_LIMIT_RANGE,
	  .limit_min = 0, .limit_max = 5 }, 0, true },
	{ "no limit flag, min bytes 3: 2 selected", { .limit_min = 3 }, 2,
	  true },
	{ "single limit=5: 3 selected", { .flags = A_LIMIT, .limit = 5 }, 3,
	  true },
	{ "single limit=5: nothing selected", { .flags = A_LIMIT, .limit = 5 },
	  0, true },
};

KUNIT_ARRAY_PARAM(limit_min, limit_min_cases, limit_case_desc);

static void limit_min_reached_test(struct kunit *test)
{
	const struct limit_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, btrfs_balance_limit_min_reached(&p->args,
							      p->count),
			p->expected);
}

static struct kunit_case balance_filters_cases[] = {
	KUNIT_CASE_PARAM(args_for_chunk_test, chunk_args_gen_params),
	KUNIT_CASE_PARAM(filter_profiles_test, profiles_gen_params),
	KUNIT_CASE_PARAM(filter_usage_test, usage_gen_params),
	KUNIT_CASE_PARAM(filter_usage_range_test, usage_range_gen_params),
	KUNIT_CASE_PARAM(filter_devid_test, devid_gen_params),
	KUNIT_CASE_PARAM(filter_drange_test, drange_gen_params),
	KUNIT_CASE_PARAM(filter_vrange_test, vrange_gen_params),
	KUNIT_CASE_PARAM(filter_stripes_test, stripes_gen_params),
	KUNIT_CASE_PARAM(filter_soft_test, soft_gen_params),
	KUNIT_CASE_PARAM(chunk_passes_filters_test, combo_gen_params),
	KUNIT_CASE_PARAM(limit_allows_test, limit_gen_params),
	KUNIT_CASE(limit_counts_without_mutating_args_test),
	KUNIT_CASE_PARAM(limit_min_reached_test, limit_min_gen_params),
	{}
};

static struct kunit_suite balance_filters_suite = {
	.name = "btrfs_balance_filters",
	.test_cases = balance_filters_cases,
};

/* ---------------------------------------------------------------------- */
/* Requests                                                               */
/* ---------------------------------------------------------------------- */

struct resume_case {
	const char *name;
	struct btrfs_balance_args in;
	struct btrfs_balance_args out;
};

static const struct resume_case resume_cases[] = {
	{ "convert gets soft", CONVERT_TO(B_RAID1),
	  { .flags = A_CONVERT | A_SOFT, .target = B_RAID1 } },
	{ "convert with usage gets soft only",
	  { .flags = A_CONVERT | A_USAGE, .target = B_DUP, .usage = 20 },
	  { .flags = A_CONVERT | A_SOFT | A_USAGE, .target = B_DUP,
	    .usage = 20 } },
	{ "convert,soft is kept",
	  { .flags = A_CONVERT | A_SOFT, .target = B_RAID10 },
	  { .flags = A_CONVERT | A_SOFT, .target = B_RAID10 } },
	{ "no filter gets usage=90", {}, USAGE_OF(90) },
	{ "devid,profiles get usage=90",
	  { .flags = A_DEVID | A_PROFILES, .devid = 3, .profiles = B_RAID1 },
	  { .flags = A_DEVID | A_PROFILES | A_USAGE, .devid = 3,
	    .profiles = B_RAID1, .usage = 90 } },
	{ "limit gets usage=90", { .flags = A_LIMIT, .limit = 5 },
	  { .flags = A_LIMIT | A_USAGE, .limit = 5, .usage = 90 } },
	{ "usage=30 is kept", USAGE_OF(30), USAGE_OF(30) },
	{ "usage=0 is kept", USAGE_OF(0), USAGE_OF(0) },
	{ "usage=10..20 is kept",
	  { .flags = A_USAGE_RANGE, .usage_min = 10, .usage_max = 20 },
	  { .flags = A_USAGE_RANGE, .usage_min = 10, .usage_max = 20 } },
};

static void resume_case_desc(const struct resume_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(resume, resume_cases, resume_case_desc);

static void args_for_resume_test(struct kunit *test)
{
	const struct resume_case *p = test->param_value;
	struct btrfs_balance_args args = p->in;

	btrfs_balance_args_for_resume(&args);
	KUNIT_EXPECT_EQ(test, args.flags, p->out.flags);
	KUNIT_EXPECT_EQ(test, args.usage, p->out.usage);
	KUNIT_EXPECT_MEMEQ(test, &args, &p->out, sizeof(args));
}

struct request_case {
	const char *name;
	struct btrfs_balance_control bctl;
	struct btrfs_balance_fs_state fs;
	int ret;
	/* For reduces_redundancy: the expected answer. */
	bool reduces;
	/* For check_request: in the reason, and not in the reason. */
	const char *why;
	const char *not_why;
};

static void request_case_desc(const struct request_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

#define FS(_n, _data, _meta, _sys)					\
	{ .num_rw_devices = _n, .avail_data_profiles = _data,		\
	  .avail_meta_profiles = _meta, .avail_sys_profiles = _sys }

#define RED(_name, _reduces, _fs, ...)					\
	{ .name = _name, .reduces = _reduces, .fs = _fs,		\
	  .bctl = { __VA_ARGS__ } }
#define META_TO(t)	.flags = T_META, .meta = CONVERT_TO(t)
#define SYS_TO(t)	.flags = T_SYS, .sys = CONVERT_TO(t)
#define DATA_TO(t)	.flags = T_DATA, .data = CONVERT_TO(t)

static const struct request_case redundancy_cases[] = {
	RED("metadata raid1 to single", true, FS(2, 0, B_RAID1, 0),
	    META_TO(B_SINGLE)),
	RED("metadata raid1 to dup", false, FS(2, 0, B_RAID1, 0),
	    META_TO(B_DUP)),
	RED("metadata dup to raid0", true, FS(1, 0, B_DUP, 0),
	    META_TO(B_RAID0)),
	RED("metadata single to single", false, FS(1, 0, B_SINGLE, 0),
	    META_TO(B_SINGLE)),
	RED("metadata single|dup to single", true,
	    FS(1, 0, B_SINGLE | B_DUP, 0), META_TO(B_SINGLE)),
	RED("metadata raid1 to raid1c4", false, FS(4, 0, B_RAID1, 0),
	    META_TO(B_RAID1C4)),
	RED("metadata raid6 to raid5", false, FS(3, 0, B_RAID6, 0),
	    META_TO(B_RAID5)),
	RED("metadata single to single, system raid1", false,
	    FS(2, 0, B_SINGLE, B_RAID1), META_TO(B_SINGLE)),
	RED("system raid1 to single", true, FS(2, 0, 0, B_RAID1),
	    SYS_TO(B_SINGLE)),
	RED("system dup to raid0", true, FS(1, 0, 0, B_DUP), SYS_TO(B_RAID0)),
	RED("system raid1 to raid10", false, FS(2, 0, 0, B_RAID1),
	    SYS_TO(B_RAID10)),
	RED("system single to single, metadata raid1", false,
	    FS(2, 0, B_RAID1, B_SINGLE), SYS_TO(B_SINGLE)),
	RED("data raid1 to single does not count", false,
	    FS(2, B_RAID1, B_RAID1, B_RAID1), DATA_TO(B_SINGLE)),
	RED("no convert", false, FS(2, B_RAID1, B_RAID1, B_RAID1),
	    .flags = T_ALL, .meta = USAGE_OF(50), .sys = USAGE_OF(50)),
	RED("single target without the convert flag", false,
	    FS(2, 0, B_RAID1, 0), .flags = T_META,
	    .meta = { .flags = A_USAGE, .target = B_SINGLE }),
};

KUNIT_ARRAY_PARAM(redundancy, redundancy_cases, request_case_desc);

static void reduces_redundancy_test(struct kunit *test)
{
	const struct request_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, btrfs_balance_reduces_redundancy(&p->bctl,
							       &p->fs),
			p->reduces);
}

#define OK(_name, _fs, ...)						\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs, .ret = 0 }
#define BAD(_name, _why, _fs, ...)					\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs,		\
	  .ret = -EINVAL, .why = _why }
/* The first problem found is reported, not a later one. */
#define FIRST(_name, _why, _not_why, _fs, ...)				\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs,		\
	  .ret = -EINVAL, .why = _why, .not_why = _not_why }
#define ONE_DEV		FS(1, B_SINGLE, B_DUP, B_DUP)
#define RAID1_FS(_n)	FS(_n, B_SINGLE, B_RAID1, B_RAID1)
#define MIXED(_n)	{ .num_rw_devices = _n, .mixed_block_groups = true }
#define BAD_CONVERT(name)	"invalid convert " name " profile"
#define REDUCES		"reduces metadata redundancy"
#define ALL_ARGS_FLAGS	(BTRFS_BALANCE_ARGS_MASK | A_CONVERT | A_SOFT)

static const struct request_case request_cases[] = {
	OK("usage on every type", ONE_DEV, .flags = T_ALL,
	   .data = USAGE_OF(50), .meta = USAGE_OF(50), .sys = USAGE_OF(50)),
	OK("no type flag", ONE_DEV, .flags = 0),
	OK("force and resume are known", ONE_DEV,
	   .flags = T_FORCE | T_RESUME | T_DATA),
	OK("every args flag is known", RAID1_FS(2), .flags = T_DATA,
	   .data = { .flags = ALL_ARGS_FLAGS, .target = B_RAID1 }),
	BAD("balance flag bit 5", "balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(5)),
	BAD("balance flag bit 6", "balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(6)),
	BAD("balance flag bit 7", "balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(7)),
	BAD("balance flag bit 10", "balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(10)),
	BAD("balance flag bit 63", "balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(63)),
	BAD("data args bit 11", "data", ONE_DEV, .flags = T_DATA,
	    .data = { .flags = A_USAGE | BIT_ULL(11) }),
	BAD("metadata args bit 63", "metadata", ONE_DEV, .flags = T_META,
	    .meta = { .flags = BIT_ULL(63) }),
	BAD("system args bit 11", "system", ONE_DEV, .flags = T_SYS,
	    .sys = { .flags = BIT_ULL(11) }),
	OK("mixed: identical usage", MIXED(1), .flags = T_DATA | T_META,
	   .data = USAGE_OF(50), .meta = USAGE_OF(50)),
	OK("mixed: identical converts", MIXED(2), .flags = T_DATA | T_META,
	   .data = CONVERT_TO(B_RAID1), .meta = CONVERT_TO(B_RAID1)),
	OK("mixed: system alone", MIXED(1), .flags = T_SYS,
	   .sys = USAGE_OF(50)),
	OK("not mixed: data alone", ONE_DEV, .flags = T_DATA,
	   .data = USAGE_OF(50)),
	BAD("mixed: data alone", "mixed", MIXED(1), .flags = T_DATA,
	    .data = USAGE_OF(50), .meta = USAGE_OF(50)),
	BAD("mixed: metadata without data", "mixed", MIXED(1),
	    .flags = T_META | T_SYS, .data = USAGE_OF(50),
	    .meta = USAGE_OF(50)),
	BAD("mixed: different usage", "mixed", MIXED(1),
	    .flags = T_DATA | T_META, .data = USAGE_OF(50),
	    .meta = USAGE_OF(30)),
	OK("data to single on 1 device", FS(1, B_RAID0, B_DUP, B_DUP),
	   DATA_TO(B_SINGLE)),
	OK("metadata to dup on 1 device", ONE_DEV, META_TO(B_DUP)),
	OK("data to raid6 on 3 devices", RAID1_FS(3), DATA_TO(B_RAID6)),
	OK("system to raid1c4 on 4 devices", RAID1_FS(4), SYS_TO(B_RAID1C4)),
	OK("target without the convert flag", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_USAGE, .target = BIT_ULL(20) }),
	BAD("data to raid1 on 1 device", BAD_CONVERT("data"), ONE_DEV,
	    DATA_TO(B_RAID1)),
	BAD("metadata to raid1c3 on 2 devices", BAD_CONVERT("metadata"),
	    RAID1_FS(2), META_TO(B_RAID1C3)),
	BAD("system to raid1c4 on 3 devices, forced", BAD_CONVERT("system"),
	    RAID1_FS(3), .flags = T_SYS | T_FORCE,
	    .sys = CONVERT_TO(B_RAID1C4)),
	BAD("data to raid6 on 2 devices", BAD_CONVERT("data"), RAID1_FS(2),
	    DATA_TO(B_RAID6)),
	BAD("data to raid0|raid1", BAD_CONVERT("data"), RAID1_FS(4),
	    DATA_TO(B_RAID0 | B_RAID1)),
	BAD("data to chunk-format single", BAD_CONVERT("data"), ONE_DEV,
	    DATA_TO(0)),
	BAD("data to a target with a type bit", BAD_CONVERT("data"),
	    RAID1_FS(2), DATA_TO(B_DATA | B_RAID1)),
	BAD("data to a target with stray bit 50", BAD_CONVERT("data"),
	    RAID1_FS(2), DATA_TO(B_SINGLE | BIT_ULL(50))),
	BAD("metadata raid1 to single", REDUCES, RAID1_FS(2),
	    META_TO(B_SINGLE)),
	OK("metadata raid1 to single, forced", RAID1_FS(2),
	   .flags = T_META | T_FORCE, .meta = CONVERT_TO(B_SINGLE)),
	BAD("system dup to single", REDUCES, ONE_DEV, SYS_TO(B_SINGLE)),
	OK("system dup to single, forced", ONE_DEV, .flags = T_SYS | T_FORCE,
	   .sys = CONVERT_TO(B_SINGLE)),
	OK("data raid1 to single needs no force",
	   FS(2, B_RAID1, B_RAID1, B_RAID1), DATA_TO(B_SINGLE)),
	FIRST("balance flags before args", "balance flags", "data", ONE_DEV,
	      .flags = T_DATA | BIT_ULL(5), .data = { .flags = BIT_ULL(11) }),
	FIRST("data args before metadata args", "data", "metadata", ONE_DEV,
	      .flags = T_DATA | T_META, .data = { .flags = BIT_ULL(11) },
	      .meta = { .flags = BIT_ULL(63) }),
	FIRST("metadata args before system args", "metadata", "system",
	      ONE_DEV, .flags = T_META | T_SYS,
	      .meta = { .flags = BIT_ULL(11) },
	      .sys = { .flags = BIT_ULL(11) }),
	FIRST("args before mixed", "data", "mixed", MIXED(1),
	      .flags = T_DATA, .data = { .flags = BIT_ULL(11) }),
	FIRST("mixed before convert", "mixed", "invalid", MIXED(1),
	      .flags = T_DATA | T_META, .data = CONVERT_TO(B_RAID1C4),
	      .meta = USAGE_OF(50)),
	FIRST("data convert before metadata convert", BAD_CONVERT("data"),
	      BAD_CONVERT("metadata"), RAID1_FS(2), .flags = T_DATA | T_META,
	      .data = CONVERT_TO(B_RAID1C4), .meta = CONVERT_TO(B_RAID1C4)),
	FIRST("convert before redundancy", BAD_CONVERT("data"), "redundancy",
	      RAID1_FS(2), .flags = T_DATA | T_SYS,
	      .data = CONVERT_TO(B_RAID1C4), .sys = CONVERT_TO(B_SINGLE)),
};

KUNIT_ARRAY_PARAM(request, request_cases, request_case_desc);

static void check_request_test(struct kunit *test)
{
	const struct request_case *p = test->param_value;
	char why[128] = "";

	KUNIT_ASSERT_EQ(test, btrfs_balance_check_request(&p->bctl, &p->fs,
							  why, sizeof(why)),
			p->ret);
	if (!p->ret)
		return;
	KUNIT_EXPECT_NOT_NULL_MSG(test, strstr(why, p->why), "why: %s", why);
	if (p->not_why)
		KUNIT_EXPECT_NULL_MSG(test, strstr(why, p->not_why),
				      "why: %s", why);
}

/* The reason is cut to the buffer and NUL-terminated. */
static void check_request_why_is_bounded_test(struct kunit *test)
{
	const struct btrfs_balance_control bctl = { .flags = BIT_ULL(5) };
	const struct btrfs_balance_fs_state fs = { .num_rw_devices = 1 };
	char why[16];

	memset(why, 'X', sizeof(why));
	KUNIT_EXPECT_EQ(test, btrfs_balance_check_request(&bctl, &fs, why, 8),
			-EINVAL);
	KUNIT_EXPECT_LT(test, strnlen(why, 8), (size_t)8);
	KUNIT_EXPECT_NULL(test, memchr_inv(why + 8, 'X', sizeof(why) - 8));
}

/* Every field has its own value, and no two bytes of a value are equal. */
static void fill_cpu_args(struct btrfs_balance_args *cpu)
{
	cpu->profiles = 0x0102030405060708ULL;
	cpu->usage = 0x1112131415161718ULL;
	cpu->devid = 0x2122232425262728ULL;
	cpu->pstart = 0x3132333435363738ULL;
	cpu->pend = 0x4142434445464748ULL;
	cpu->vstart = 0x5152535455565758ULL;
	cpu->vend = 0x6162636465666768ULL;
	cpu->target = 0x7172737475767778ULL;
	cpu->flags = 0x8182838485868788ULL;
	cpu->limit = 0x9192939495969798ULL;
	cpu->stripes_min = 0xa1a2a3a4;
	cpu->stripes_max = 0xb1b2b3b4;
}

static void fill_disk_args(struct btrfs_disk_balance_args *disk)
{
	disk->profiles = cpu_to_le64(0x0102030405060708ULL);
	disk->usage = cpu_to_le64(0x1112131415161718ULL);
	disk->devid = cpu_to_le64(0x2122232425262728ULL);
	disk->pstart = cpu_to_le64(0x3132333435363738ULL);
	disk->pend = cpu_to_le64(0x4142434445464748ULL);
	disk->vstart = cpu_to_le64(0x5152535455565758ULL);
	disk->vend = cpu_to_le64(0x6162636465666768ULL);
	disk->target = cpu_to_le64(0x7172737475767778ULL);
	disk->flags = cpu_to_le64(0x8182838485868788ULL);
	disk->limit = cpu_to_le64(0x9192939495969798ULL);
	disk->stripes_min = cpu_to_le32(0xa1a2a3a4);
	disk->stripes_max = cpu_to_le32(0xb1b2b3b4);
}

static void args_to_disk_test(struct kunit *test)
{
	struct btrfs_balance_args cpu;
	struct btrfs_disk_balance_args disk;
	struct btrfs_disk_balance_args expected;

	memset(&cpu, 0xaa, sizeof(cpu));
	fill_cpu_args(&cpu);
	memset(&expected, 0, sizeof(expected));
	fill_disk_args(&expected);
	memset(&disk, 0x55, sizeof(disk));

	btrfs_balance_args_to_disk(&disk, &cpu);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.flags), 0x8182838485868788ULL);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(disk.stripes_max), 0xb1b2b3b4U);
	KUNIT_EXPECT_NULL(test, memchr_inv(disk.unused, 0,
					   sizeof(disk.unused)));
	KUNIT_EXPECT_MEMEQ(test, &disk, &expected, sizeof(disk));
}

static void args_to_cpu_test(struct kunit *test)
{
	struct btrfs_disk_balance_args disk;
	struct btrfs_balance_args cpu;
	struct btrfs_balance_args expected;

	memset(&disk, 0xaa, sizeof(disk));
	fill_disk_args(&disk);
	memset(&expected, 0, sizeof(expected));
	fill_cpu_args(&expected);
	memset(&cpu, 0x55, sizeof(cpu));

	btrfs_balance_args_to_cpu(&cpu, &disk);
	KUNIT_EXPECT_EQ(test, cpu.profiles, 0x0102030405060708ULL);
	KUNIT_EXPECT_EQ(test, cpu.stripes_min, 0xa1a2a3a4U);
	KUNIT_EXPECT_NULL(test, memchr_inv(cpu.unused, 0, sizeof(cpu.unused)));
	KUNIT_EXPECT_MEMEQ(test, &cpu, &expected, sizeof(cpu));
}

static void args_round_trip_test(struct kunit *test)
{
	struct btrfs_balance_args orig = {
		.profiles = B_SINGLE | B_RAID1, .usage_min = 10,
		.usage_max = 80, .devid = 3, .pstart = MIB(1), .pend = GIB(1),
		.vstart = GIB(10), .vend = GIB(20), .target = B_RAID10,
		.flags = A_PROFILES | A_USAGE_RANGE | A_DEVID | A_DRANGE |
			 A_VRANGE | A_LIMIT_RANGE | A_STRIPES | A_CONVERT,
		.limit_min = 2, .limit_max = 9, .stripes_min = 1,
		.stripes_max = 4,
	};
	struct btrfs_balance_args dirty = orig;
	struct btrfs_balance_args cpu;
	struct btrfs_disk_balance_args disk;
	struct btrfs_disk_balance_args disk2;

	btrfs_balance_args_to_disk(&disk, &orig);
	btrfs_balance_args_to_cpu(&cpu, &disk);
	KUNIT_EXPECT_MEMEQ(test, &cpu, &orig, sizeof(cpu));

	/* Garbage in unused does not survive the trip. */
	memset(dirty.unused, 0xaa, sizeof(dirty.unused));
	btrfs_balance_args_to_disk(&disk, &dirty);
	btrfs_balance_args_to_cpu(&cpu, &disk);
	KUNIT_EXPECT_MEMEQ(test, &cpu, &orig, sizeof(cpu));

	/* And the other way round, from disk. */
	memset(disk.unused, 0xaa, sizeof(disk.unused));
	btrfs_balance_args_to_cpu(&cpu, &disk);
	btrfs_balance_args_to_disk(&disk2, &cpu);
	memset(disk.unused, 0, sizeof(disk.unused));
	KUNIT_EXPECT_MEMEQ(test, &disk2, &disk, sizeof(disk));
}

struct describe_case {
	const char *name;
	struct btrfs_balance_control bctl;
	size_t size;
	const char *text;
};

static void describe_case_desc(const struct describe_case *p, char *desc)
{
	strscpy(desc, p->name, KUNIT_PARAM_DESC_SIZE);
}

#define DESCRIBE_BUF	128
#define DESCRIBE(_name, _text, ...)					\
	{ .name = _name, .text = _text, .size = DESCRIBE_BUF,		\
	  .bctl = { __VA_ARGS__ } }
#define CUT(_name, _size, _text, ...)					\
	{ .name = _name, .text = _text, .size = _size,			\
	  .bctl = { __VA_ARGS__ } }
#define CONVERT_SOFT(t)	{ .flags = A_CONVERT | A_SOFT, .target = (t) }
/* "start -dconvert=raid1,soft,usage=50 -m": 38 characters. */
#define CONVERT_USAGE_META						\
	.flags = T_DATA | T_META,					\
	.data = { .flags = A_CONVERT | A_SOFT | A_USAGE,		\
		  .target = B_RAID1, .usage = 50 }

static const struct describe_case describe_cases[] = {
	DESCRIBE("no type", "start", .flags = 0),
	DESCRIBE("resume, no type", "resume", .flags = T_RESUME),
	DESCRIBE("data without filters", "start -d", .flags = T_DATA),
	DESCRIBE("usage on data and metadata", "start -dusage=50 -musage=30",
		 .flags = T_DATA | T_META, .data = USAGE_OF(50),
		 .meta = USAGE_OF(30)),
	DESCRIBE("resume of a forced convert",
		 "resume -f -dconvert=raid1,soft -mconvert=raid1,soft -sconvert=raid1,soft",
		 .flags = T_RESUME | T_FORCE | T_ALL,
		 .data = CONVERT_SOFT(B_RAID1), .meta = CONVERT_SOFT(B_RAID1),
		 .sys = CONVERT_SOFT(B_RAID1)),
	DESCRIBE("convert to single", "start -dconvert=single",
		 .flags = T_DATA, .data = CONVERT_TO(B_SINGLE)),
	DESCRIBE("soft alone", "start -dsoft", .flags = T_DATA,
		 .data = { .flags = A_SOFT }),
	DESCRIBE("profiles", "start -mprofiles=single|dup|raid1c3",
		 .flags = T_META, .meta = { .flags = A_PROFILES,
		 .profiles = B_RAID1C3 | B_DUP | B_SINGLE }),
	DESCRIBE("usage range", "start -dusage=10..80", .flags = T_DATA,
		 .data = { .flags = A_USAGE_RANGE, .usage_min = 10,
		 .usage_max = 80 }),
	DESCRIBE("device filters",
		 "start -sdevid=3,drange=1048576..2097152,vrange=0..1073741824",
		 .flags = T_SYS, .sys = { .flags = A_DEVID | A_DRANGE |
		 A_VRANGE, .devid = 3, .pstart = MIB(1), .pend = MIB(2),
		 .vstart = 0, .vend = GIB(1) }),
	DESCRIBE("limit", "start -mlimit=5", .flags = T_META,
		 .meta = { .flags = A_LIMIT, .limit = 5 }),
	DESCRIBE("limit range and stripes", "start -mlimit=2..9,stripes=1..4",
		 .flags = T_META, .meta = { .flags = A_LIMIT_RANGE | A_STRIPES,
		 .limit_min = 2, .limit_max = 9, .stripes_min = 1,
		 .stripes_max = 4 }),
	DESCRIBE("every filter, in order",
		 "start -dconvert=raid10,soft,profiles=raid1,usage=90,devid=2,drange=0..4096,vrange=8192..16384,limit=7,stripes=2..4",
		 .flags = T_DATA, .data = { .flags = A_STRIPES | A_LIMIT |
		 A_VRANGE | A_DRANGE | A_DEVID | A_USAGE | A_PROFILES |
		 A_SOFT | A_CONVERT, .target = B_RAID10,
		 .profiles = B_RAID1, .usage = 90, .devid = 2, .pstart = 0,
		 .pend = 4096, .vstart = 8192, .vend = 16384, .limit = 7,
		 .stripes_min = 2, .stripes_max = 4 }),
	DESCRIBE("types in order, force first", "start -f -d -m -s",
		 .flags = T_SYS | T_META | T_DATA | T_FORCE),
	DESCRIBE("args of an unselected type", "start -musage=30",
		 .flags = T_META, .data = USAGE_OF(50), .meta = USAGE_OF(30)),
	CUT("size 6 keeps start", 6, "start", .flags = T_FORCE | T_DATA,
	    .data = USAGE_OF(50)),
	CUT("size 5 keeps nothing", 5, "", .flags = T_FORCE | T_DATA,
	    .data = USAGE_OF(50)),
	CUT("size 1 keeps nothing", 1, "", .flags = T_DATA),
	CUT("size 27 cuts before usage=30", 27, "start -dusage=50 -m",
	    .flags = T_DATA | T_META, .data = USAGE_OF(50),
	    .meta = USAGE_OF(30)),
	CUT("size 28 holds all", 28, "start -dusage=50 -musage=30",
	    .flags = T_DATA | T_META, .data = USAGE_OF(50),
	    .meta = USAGE_OF(30)),
	CUT("size 35 cuts before ,usage=50 and stops", 35,
	    "start -dconvert=raid1,soft", CONVERT_USAGE_META),
	CUT("size 36 holds ,usage=50", 36,
	    "start -dconvert=raid1,soft,usage=50", CONVERT_USAGE_META),
	CUT("size 39 holds all", 39, "start -dconvert=raid1,soft,usage=50 -m",
	    CONVERT_USAGE_META),
};

KUNIT_ARRAY_PARAM(describe, describe_cases, describe_case_desc);

static void describe_test(struct kunit *test)
{
	const struct describe_case *p = test->param_value;
	char buf[DESCRIBE_BUF + 8];

	memset(buf, 'X', sizeof(buf));
	btrfs_balance_describe(&p->bctl, buf, p->size);
	KUNIT_EXPECT_STREQ(test, buf, p->text);
	/* Nothing is written past @size. */
	KUNIT_EXPECT_NULL(test, memchr_inv(buf + p->size, 'X',
					   sizeof(buf) - p->size));
}

static struct kunit_case balance_requests_cases[] = {
	KUNIT_CASE_PARAM(args_for_resume_test, resume_gen_params),
	KUNIT_CASE_PARAM(reduces_redundancy_test, redundancy_gen_params),
	KUNIT_CASE_PARAM(check_request_test, request_gen_params),
	KUNIT_CASE(check_request_why_is_bounded_test),
	KUNIT_CASE(args_to_disk_test),
	KUNIT_CASE(args_to_cpu_test),
	KUNIT_CASE(args_round_trip_test),
	KUNIT_CASE_PARAM(describe_test, describe_gen_params),
	{}
};

static struct kunit_suite balance_requests_suite = {
	.name = "btrfs_balance_requests",
	.test_cases = balance_requests_cases,
};

kunit_test_suites(&balance_profiles_suite, &balance_filters_suite,
		  &balance_requests_suite);
