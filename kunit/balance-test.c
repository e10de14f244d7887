// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of the balance decisions: each case is a literal input next
 * to the result worked out by hand.  No expected value is computed by the
 * code under test.
 */

#include <kunit/test.h>
#include <linux/string.h>
#include "../misc.h"
#include "../volumes.h"
#include "../balance.h"

/* Shorthands that keep the tables readable. */
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
/* SINGLE in extended format; in chunk format single is no profile bit. */
#define B_SINGLE	BTRFS_AVAIL_ALLOC_BIT_SINGLE

#define T_DATA		BTRFS_BALANCE_DATA
#define T_SYS		BTRFS_BALANCE_SYSTEM
#define T_META		BTRFS_BALANCE_METADATA
#define T_ALL		BTRFS_BALANCE_TYPE_MASK

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

struct valid_case {
	const char *name;
	u64 flags;
	int extended;
	int valid;
};

static const struct valid_case valid_cases[] = {
	{ "chunk: no profile bit is single", 0, 0, 1 },
	{ "extended: no profile bit is no profile", 0, 1, 0 },
	{ "chunk: type bits alone are single", B_DATA | B_META, 0, 1 },
	{ "extended: type bits alone are no profile", B_SYS, 1, 0 },
	{ "chunk: raid1", B_RAID1, 0, 1 },
	{ "extended: raid1", B_RAID1, 1, 1 },
	{ "chunk: metadata raid1c4", B_META | B_RAID1C4, 0, 1 },
	{ "extended: data raid6", B_DATA | B_RAID6, 1, 1 },
	{ "extended: the single bit", B_SINGLE, 1, 1 },
	{ "extended: data single", B_DATA | B_SINGLE, 1, 1 },
	{ "chunk: the single bit is stray", B_SINGLE, 0, 0 },
	{ "chunk: raid0|raid1", B_RAID0 | B_RAID1, 0, 0 },
	{ "extended: dup|raid10", B_DUP | B_RAID10, 1, 0 },
	{ "extended: single|raid1", B_SINGLE | B_RAID1, 1, 0 },
	{ "chunk: stray bit 11", BIT_ULL(11), 0, 0 },
	{ "chunk: raid1 with stray bit 11", B_RAID1 | BIT_ULL(11), 0, 0 },
	{ "extended: raid5 with stray bit 47", B_RAID5 | BIT_ULL(47), 1, 0 },
	{ "extended: stray bit 63", BIT_ULL(63), 1, 0 },
};

KUNIT_ARRAY_PARAM_DESC(valid, valid_cases, name);

static void profile_is_valid_test(struct kunit *test)
{
	const struct valid_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, alloc_profile_is_valid(p->flags, p->extended),
			p->valid);
}

/* Each profile alone is valid, any two together are not. */
static void every_profile_alone_is_valid_test(struct kunit *test)
{
	int i, j;

	for (i = 0; i < BTRFS_NR_RAID_TYPES; i++) {
		const char *name = btrfs_raid_array[i].raid_name;
		u64 chunk = btrfs_raid_array[i].bg_flag;
		u64 ext = chunk_to_extended(chunk);

		KUNIT_EXPECT_EQ_MSG(test, alloc_profile_is_valid(chunk, 0), 1,
				    "%s", name);
		KUNIT_EXPECT_EQ_MSG(test, alloc_profile_is_valid(ext, 1), 1,
				    "%s", name);
		for (j = 0; j < BTRFS_NR_RAID_TYPES; j++) {
			u64 two = ext |
				  chunk_to_extended(btrfs_raid_array[j].bg_flag);

			if (i == j)
				continue;
			KUNIT_EXPECT_EQ_MSG(test, alloc_profile_is_valid(two, 1),
					    0, "%s|%s", name,
					    btrfs_raid_array[j].raid_name);
		}
	}
}

struct possible_case {
	const char *name;
	u64 num_devices;
	u64 profiles;
};

static const struct possible_case possible_cases[] = {
	{ "0 rw devices", 0, 0 },
	{ "1 rw device", 1, B_DUP | B_RAID0 },
	{ "2 rw devices", 2, B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 },
	{ "3 rw devices", 3, B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 |
			     B_RAID6 | B_RAID1C3 },
	{ "4 rw devices", 4, B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 |
			     B_RAID6 | B_RAID1C3 | B_RAID1C4 },
	{ "8 rw devices", 8, B_DUP | B_RAID0 | B_RAID1 | B_RAID10 | B_RAID5 |
			     B_RAID6 | B_RAID1C3 | B_RAID1C4 },
};

KUNIT_ARRAY_PARAM_DESC(possible, possible_cases, name);

static void possible_profiles_test(struct kunit *test)
{
	const struct possible_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, possible_profiles(p->num_devices), p->profiles);
}

/* The masks above assume the devs_min values of this kernel: check them. */
static void devs_min_is_what_the_tables_assume_test(struct kunit *test)
{
	static const u8 devs_min[BTRFS_NR_RAID_TYPES] = {
		[BTRFS_RAID_SINGLE] = 1, [BTRFS_RAID_RAID0] = 1,
		[BTRFS_RAID_DUP] = 1, [BTRFS_RAID_RAID1] = 2,
		[BTRFS_RAID_RAID10] = 2, [BTRFS_RAID_RAID5] = 2,
		[BTRFS_RAID_RAID6] = 3, [BTRFS_RAID_RAID1C3] = 3,
		[BTRFS_RAID_RAID1C4] = 4,
	};
	int i;

	for (i = 0; i < BTRFS_NR_RAID_TYPES; i++)
		KUNIT_EXPECT_EQ_MSG(test, btrfs_raid_array[i].devs_min,
				    devs_min[i], "%s",
				    btrfs_raid_array[i].raid_name);
}

/*
 * The balance running or paused while a chunk is allocated: none, one
 * that relocates, or one that was paused (RESUME and SOFT set, progress
 * made).  The allocator must not care about the difference.  SYS_DROPPED,
 * META_DROPPED: running, its system or metadata convert dropped for want
 * of room.
 */
enum bctl_state { NO_BALANCE, RUNNING, PAUSED, SYS_DROPPED, META_DROPPED };

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
		bctl->flags |= BTRFS_BALANCE_RESUME;
		bctl->stat.expected = 10;
		bctl->stat.considered = 4;
		bctl->stat.completed = 3;
	}
	if (p->state == SYS_DROPPED)
		set_bit(BTRFS_BALANCE_SYS_INDEX, &bctl->convert_dropped);
	if (p->state == META_DROPPED)
		set_bit(BTRFS_BALANCE_META_INDEX, &bctl->convert_dropped);
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
	{ "system convert dropped: no target", SYS_DROPPED, 0, 0, B_RAID1C3,
	  B_SYS, 0, 0 },
	{ "system convert dropped, metadata still converts", SYS_DROPPED,
	  0, B_RAID1, B_RAID1C3, B_META, 0, B_META | B_RAID1 },
	{ "system convert dropped, data still converts", SYS_DROPPED,
	  B_RAID1, 0, B_RAID1C3, B_DATA, 0, B_DATA | B_RAID1 },
	{ "metadata convert dropped: no target", META_DROPPED, 0, B_RAID1C3, 0,
	  B_META, 0, 0 },
	{ "metadata convert dropped, system still converts", META_DROPPED,
	  0, B_RAID1C3, B_RAID1, B_SYS, 0, B_SYS | B_RAID1 },
};

KUNIT_ARRAY_PARAM_DESC(restripe, restripe_cases, name);

static void restripe_target_test(struct kunit *test)
{
	const struct profile_case *p = test->param_value;
	struct btrfs_balance_control bctl;

	KUNIT_EXPECT_EQ(test, get_restripe_target(init_bctl(&bctl, p),
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
	{ "no rw device: single", NO_BALANCE, 0, 0, 0,
	  B_DATA | BTRFS_EXTENDED_PROFILE_MASK, 0, B_DATA },
	{ "raid10 over raid1 and raid0", NO_BALANCE, 0, 0, 0,
	  B_DATA | B_RAID10 | B_RAID1 | B_RAID0, 2, B_DATA | B_RAID10 },
	{ "raid6 and raid1c3 need 3 devices", NO_BALANCE, 0, 0, 0,
	  B_DATA | B_RAID6 | B_RAID1C3 | B_RAID0, 2, B_DATA | B_RAID0 },
	{ "system convert dropped: the other profile", SYS_DROPPED,
	  0, 0, B_RAID1C3, B_SYS | B_RAID1 | B_RAID1C3, 3, B_SYS | B_RAID1 },
	{ "system convert dropped: its target if alone", SYS_DROPPED,
	  0, 0, B_RAID1C3, B_SYS | B_RAID1C3, 3, B_SYS | B_RAID1C3 },
	{ "system convert to single dropped: dup", SYS_DROPPED,
	  0, 0, B_SINGLE, B_SYS | B_SINGLE | B_DUP, 1, B_SYS | B_DUP },
	{ "system convert to dup dropped: single", SYS_DROPPED,
	  0, 0, B_DUP, B_SYS | B_SINGLE | B_DUP, 1, B_SYS },
	{ "system convert dropped, other profile impossible: target", SYS_DROPPED,
	  0, 0, B_RAID1C3, B_SYS | B_RAID1C4 | B_RAID1C3, 3, B_SYS | B_RAID1C3 },
	{ "metadata convert dropped: the other profile", META_DROPPED,
	  0, B_RAID1C3, 0, B_META | B_RAID1 | B_RAID1C3, 3, B_META | B_RAID1 },
	{ "metadata convert to raid6 dropped: dup over single", META_DROPPED,
	  0, B_RAID6, 0, B_META | B_SINGLE | B_DUP | B_RAID6, 3,
	  B_META | B_DUP },
	{ "metadata convert dropped, other profile impossible: target",
	  META_DROPPED, 0, B_RAID1C3, 0, B_META | B_RAID1C4 | B_RAID1C3, 3,
	  B_META | B_RAID1C3 },
	{ "metadata convert dropped, mixed: not masked", META_DROPPED,
	  0, B_RAID1C3, 0, B_DATA | B_META | B_RAID1 | B_RAID1C3, 3,
	  B_DATA | B_META | B_RAID1C3 },
	{ "metadata convert dropped: system reduced as before", META_DROPPED,
	  0, B_RAID1C3, 0, B_SYS | B_RAID1 | B_RAID1C3, 3, B_SYS | B_RAID1C3 },
	{ "system convert dropped: data reduced as before", SYS_DROPPED,
	  0, 0, B_RAID1C3, B_DATA | B_RAID1 | B_RAID1C3, 3,
	  B_DATA | B_RAID1C3 },
};

KUNIT_ARRAY_PARAM_DESC(alloc, alloc_cases, name);

static void reduce_alloc_profile_test(struct kunit *test)
{
	const struct profile_case *p = test->param_value;
	struct btrfs_balance_control bctl;

	KUNIT_EXPECT_EQ(test, reduce_alloc_profile(init_bctl(&bctl, p),
						   p->flags, p->num_devices),
			p->expected);
}

struct room_case {
	const char *name;
	u64 room;
	u64 used;
	u64 reserve;
	u64 devs_with_room;
	u64 devs_min;
	unsigned int profiles;
	bool too_little;
};

static const struct room_case room_cases[] = {
	{ "devices hold another chunk: enough", 0, SZ_1M, SZ_1M, 3, 3, 2,
	  false },
	{ "no room for the reserve, devices full", 0, 0, SZ_1M, 2, 3, 2, true },
	{ "empty chunk, no reserve, no room: enough", 0, 0, 0, 2, 3, 2, false },
	{ "room for used and reserve", 110, 100, 10, 0, 1, 2, false },
	{ "room for used, not the reserve", 109, 100, 10, 0, 1, 2, true },
	{ "empty chunk, room for the reserve", 10, 0, 10, 2, 3, 2, false },
	{ "raid1 one device short", SZ_1M, SZ_4M, 0, 1, 2, 2, true },
	{ "single needs one device", 0, SZ_4M, SZ_1M, 1, 1, 2, false },
	/* A -musage run on a nearly full filesystem: relocated as upstream. */
	{ "one profile, room for used, not the reserve", 109, 100, 10, 0, 1,
	  1, false },
	{ "one profile, no room at all, devices full", 0, SZ_4M, SZ_1M, 0, 2,
	  1, false },
	{ "three profiles, room for used, not the reserve", 109, 100, 10, 0, 1,
	  3, true },
};

KUNIT_ARRAY_PARAM_DESC(room, room_cases, name);

static void room_too_little_test(struct kunit *test)
{
	const struct room_case *r = test->param_value;

	KUNIT_EXPECT_EQ(test, balance_room_too_little(r->room, r->used,
						      r->reserve,
						      r->devs_with_room,
						      r->devs_min,
						      r->profiles),
			r->too_little);
}

struct stuck_case {
	const char *name;
	bool devices_have_room;
	bool retried;
	bool chunk_alloc_failed;
	bool last_try;
	bool stuck;
};

static const struct stuck_case stuck_cases[] = {
	{ "devices without room", false, false, false, false, true },
	{ "devices without room, full mark of before", false, false, true,
	  false, true },
	{ "room, first miss", true, false, false, false, false },
	{ "room, first miss, full mark of before", true, false, true, false,
	  false },
	/* Another task made a chunk twice in a row: seen in power-cut runs. */
	{ "room, missed again without a failed chunk", true, true, false,
	  false, false },
	{ "room, a chunk of the target failed again", true, true, true, false,
	  true },
	/* Rather than fail inside a transaction: seen in a gate run. */
	{ "room, the last try missed too", true, true, false, true, true },
};

KUNIT_ARRAY_PARAM_DESC(stuck, stuck_cases, name);

static void metadata_convert_stuck_test(struct kunit *test)
{
	const struct stuck_case *c = test->param_value;

	KUNIT_EXPECT_EQ(test,
			balance_metadata_convert_stuck(c->devices_have_room,
						       c->retried,
						       c->chunk_alloc_failed,
						       c->last_try),
			c->stuck);
}

static struct kunit_case balance_profiles_cases[] = {
	KUNIT_CASE_PARAM(profile_is_valid_test, valid_gen_params),
	KUNIT_CASE(every_profile_alone_is_valid_test),
	KUNIT_CASE_PARAM(possible_profiles_test, possible_gen_params),
	KUNIT_CASE(devs_min_is_what_the_tables_assume_test),
	KUNIT_CASE_PARAM(restripe_target_test, restripe_gen_params),
	KUNIT_CASE_PARAM(reduce_alloc_profile_test, alloc_gen_params),
	KUNIT_CASE_PARAM(room_too_little_test, room_gen_params),
	KUNIT_CASE_PARAM(metadata_convert_stuck_test, stuck_gen_params),
	{}
};

static struct kunit_suite balance_profiles_suite = {
	.name = "btrfs_balance_profiles",
	.test_cases = balance_profiles_cases,
};

/*
 * Filters.  Each returns 1 when it filters the chunk out, 0 when the chunk
 * may be relocated; the tables say whether the chunk passes.
 */
struct filter_case {
	const char *name;
	struct btrfs_balance_args args;
	u64 type;
	u64 start;
	u64 length;
	u64 used;
	int num_stripes;
	struct btrfs_balance_stripe stripes[4];
	bool pass;
};

static void init_chunk(struct btrfs_balance_chunk *chunk,
		       const struct filter_case *p,
		       struct btrfs_balance_stripe *stripes)
{
	memcpy(stripes, p->stripes, sizeof(p->stripes));
	*chunk = (struct btrfs_balance_chunk) {
		.type = p->type,
		.start = p->start,
		.length = p->length,
		.used = p->used,
		.num_stripes = p->num_stripes,
		.stripes = stripes,
	};
}

static void run_filter_case(struct kunit *test,
			    int (*filter)(const struct btrfs_balance_chunk *,
					  const struct btrfs_balance_args *))
{
	const struct filter_case *p = test->param_value;
	struct btrfs_balance_stripe stripes[4];
	struct btrfs_balance_chunk chunk;

	init_chunk(&chunk, p, stripes);
	KUNIT_EXPECT_EQ(test, filter(&chunk, &p->args), p->pass ? 0 : 1);
}

/* The profiles and soft filters look at the chunk type only. */
static void run_type_filter_case(struct kunit *test,
				 int (*filter)(u64,
					       const struct btrfs_balance_args *))
{
	const struct filter_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, filter(p->type, &p->args), p->pass ? 0 : 1);
}

#define PROFILES_CASE(_name, _profiles, _type, _pass)			\
	{ .name = _name, .type = _type, .pass = _pass,			\
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

KUNIT_ARRAY_PARAM_DESC(profiles, profiles_cases, name);

static void profiles_filter_test(struct kunit *test)
{
	run_type_filter_case(test, chunk_profiles_filter);
}

/*
 * usage=N: less than N percent of the chunk used; 0 means empty.
 * 1GiB = 1073741824; N% of it rounds down: 1% = 10737418, 99% = 1063004405.
 */
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
	USAGE_CASE("2^32+1: half passes", BIT_ULL(32) + 1, GIB(1),
		   536870912, true),
};

KUNIT_ARRAY_PARAM_DESC(usage, usage_cases, name);

static void usage_filter_test(struct kunit *test)
{
	run_filter_case(test, chunk_usage_filter);
}

/*
 * Whole multiples of 2^32 are not 0: the usage filter reads the whole
 * field, not usage_min, which shares its bytes with one half of it.
 */
static void usage_filter_2_32_test(struct kunit *test)
{
	struct btrfs_balance_chunk half = { .type = B_DATA, .length = GIB(1),
					    .used = GIB(1) / 2 };
	struct btrfs_balance_chunk empty = { .type = B_DATA, .length = GIB(1) };
	static const u64 usages[] = { BIT_ULL(32), 3 * BIT_ULL(32),
				      BIT_ULL(63), U64_MAX };
	int i;

	for (i = 0; i < ARRAY_SIZE(usages); i++) {
		struct btrfs_balance_args args = { .flags = A_USAGE,
						   .usage = usages[i] };

		KUNIT_EXPECT_EQ_MSG(test, chunk_usage_filter(&empty, &args), 0,
				    "usage=%llu", usages[i]);
		KUNIT_EXPECT_EQ_MSG(test, chunk_usage_filter(&half, &args), 0,
				    "usage=%llu", usages[i]);
	}
}

/* usage=MIN..MAX: at least MIN and less than MAX percent used. */
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
	RANGE_CASE("50..open end: full minus one passes", 50, U32_MAX,
		   1073741823, true),
	RANGE_CASE("1..99: 10737417 fails", 1, 99, 10737417, false),
	RANGE_CASE("1..99: 10737418 passes", 1, 99, 10737418, true),
	RANGE_CASE("1..99: 1063004404 passes", 1, 99, 1063004404, true),
	RANGE_CASE("1..99: 1063004405 fails", 1, 99, 1063004405, false),
	RANGE_CASE("50..50: empty range", 50, 50, 536870912, false),
	RANGE_CASE("70..30: inverted range", 70, 30, 536870912, false),
};

KUNIT_ARRAY_PARAM_DESC(usage_range, usage_range_cases, name);

static void usage_range_filter_test(struct kunit *test)
{
	run_filter_case(test, chunk_usage_range_filter);
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

KUNIT_ARRAY_PARAM_DESC(devid, devid_cases, name);

static void devid_filter_test(struct kunit *test)
{
	run_filter_case(test, chunk_devid_filter);
}

/*
 * drange=PSTART..PEND: a stripe on the devid overlaps [pstart, pend).
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
/* Corrupted: raid1 needs two stripes, so it has no whole data stripe. */
#define RAID1_ONE_STRIPE						\
	.type = B_DATA | B_RAID1, .length = GIB(1), .num_stripes = 1,	\
	.stripes = { { 1, GIB(4) } }

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
	DRANGE_CASE("single: empty range inside the stripe selects it", 1,
		    GIB(4) + 1, GIB(4) + 1, true, SINGLE_AT_4G),
	DRANGE_CASE("single: inverted range around the stripe", 1, GIB(6),
		    GIB(3), false, SINGLE_AT_4G),
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
	DRANGE_CASE("raid1 with one stripe: no data stripe, no match", 1, 0,
		    U64_MAX, false, RAID1_ONE_STRIPE),
};

KUNIT_ARRAY_PARAM_DESC(drange, drange_cases, name);

static void drange_filter_test(struct kunit *test)
{
	run_filter_case(test, chunk_drange_filter);
}

/* vrange=VSTART..VEND: the chunk overlaps [vstart, vend) */
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
	VRANGE_CASE("empty range inside the chunk selects it", GIB(10) + 1,
		    GIB(10) + 1, true),
	VRANGE_CASE("inverted range around the chunk", GIB(12), GIB(9),
		    false),
	VRANGE_CASE("whole address space", 0, U64_MAX, true),
};

KUNIT_ARRAY_PARAM_DESC(vrange, vrange_cases, name);

static void vrange_filter_test(struct kunit *test)
{
	run_filter_case(test, chunk_vrange_filter);
}

/* stripes=MIN..MAX, both inclusive, on a three stripe chunk. */
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
	STRIPES_CASE("4..2: inverted", 4, 2, false),
};

KUNIT_ARRAY_PARAM_DESC(stripes, stripes_cases, name);

static void stripes_filter_test(struct kunit *test)
{
	run_filter_case(test, chunk_stripes_range_filter);
}

/* soft: a convert leaves the chunks that have the target profile. */
#define SOFT_CASE(_name, _flags, _target, _type, _pass)			\
	{ .name = _name, .type = _type, .pass = _pass,			\
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

KUNIT_ARRAY_PARAM_DESC(soft, soft_cases, name);

static void soft_filter_test(struct kunit *test)
{
	run_type_filter_case(test, chunk_soft_convert_filter);
}

/*
 * should_balance_chunk() with every type selected and these data args, on
 * a data raid1 chunk at [10GiB, 11GiB), half used (536870912 bytes), with
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
	COMBO("usage and usage range: the range passes", true,
	      .flags = A_USAGE | A_USAGE_RANGE, .usage_min = 40,
	      .usage_max = 60),
	COMBO("usage and usage range: the range fails", false,
	      .flags = A_USAGE | A_USAGE_RANGE, .usage = USAGE_10_10),
	COMBO("usage=0..60 as btrfs-progs sends it: the range applies", true,
	      .flags = A_USAGE | A_USAGE_RANGE, .usage_min = 0,
	      .usage_max = 60),
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
	/* The limits count chunks: the walk applies them, not the filters. */
	COMBO("limit=0 is not a filter", true, .flags = A_LIMIT, .limit = 0),
	COMBO("limit=5..0 is not a filter", true, .flags = A_LIMIT_RANGE,
	      .limit_min = 5, .limit_max = 0),
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

KUNIT_ARRAY_PARAM_DESC(combo, combo_cases, name);

static void should_balance_chunk_test(struct kunit *test)
{
	const struct filter_case *p = test->param_value;
	struct btrfs_balance_control bctl = { .flags = T_ALL, .data = p->args };
	struct btrfs_balance_stripe stripes[4];
	struct btrfs_balance_chunk chunk;

	init_chunk(&chunk, p, stripes);
	KUNIT_EXPECT_EQ(test, should_balance_chunk(&bctl, &chunk),
			p->pass ? 1 : 0);
}

/* Which args a chunk is judged by: they differ in their usage filter. */
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
	{ "force and resume select nothing",
	  BTRFS_BALANCE_FORCE | BTRFS_BALANCE_RESUME, B_DATA, NO_ARGS },
};

KUNIT_ARRAY_PARAM_DESC(chunk_args, chunk_args_cases, name);

static void args_of_the_chunk_type_apply_test(struct kunit *test)
{
	const struct chunk_args_case *p = test->param_value;
	/* Each type's args pass a chunk with only one used byte count. */
	struct btrfs_balance_control bctl = {
		.flags = p->bctl_flags,
		.data = { .flags = A_USAGE_RANGE, .usage_min = 10,
			  .usage_max = 20 },
		.meta = { .flags = A_USAGE_RANGE, .usage_min = 30,
			  .usage_max = 40 },
		.sys = { .flags = A_USAGE_RANGE, .usage_min = 50,
			 .usage_max = 60 },
	};
	static const u64 used_pct[] = { 15, 35, 55 };
	int i;

	for (i = 0; i < ARRAY_SIZE(used_pct); i++) {
		struct btrfs_balance_chunk chunk = {
			.type = p->chunk_type, .length = 100,
			.used = used_pct[i],
		};
		bool expected = p->which == DATA_ARGS + i;

		KUNIT_EXPECT_EQ_MSG(test, should_balance_chunk(&bctl, &chunk),
				    expected ? 1 : 0, "%llu%% used",
				    used_pct[i]);
	}
}

/* The chunk walk: a counting pass, then a relocation pass. */

struct type_index_case {
	const char *name;
	u64 type;
	int index;
};

static const struct type_index_case type_index_cases[] = {
	{ "data", B_DATA, BTRFS_BALANCE_DATA_INDEX },
	{ "data raid1", B_DATA | B_RAID1, BTRFS_BALANCE_DATA_INDEX },
	{ "metadata dup", B_META | B_DUP, BTRFS_BALANCE_META_INDEX },
	{ "system raid1c3", B_SYS | B_RAID1C3, BTRFS_BALANCE_SYS_INDEX },
	{ "mixed counts as data", B_DATA | B_META, BTRFS_BALANCE_DATA_INDEX },
};

KUNIT_ARRAY_PARAM_DESC(type_index, type_index_cases, name);

static void type_index_test(struct kunit *test)
{
	const struct type_index_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, balance_type_index(p->type), p->index);
}

#define SKIP		BTRFS_BALANCE_SKIP
#define COUNT		BTRFS_BALANCE_COUNT
#define RELOCATE	BTRFS_BALANCE_RELOCATE
#define MAX_WALK	8

/*
 * A walk over chunks of these types, highest logical address first, all
 * of them half used: what each pass does with each chunk.
 */
struct walk_case {
	const char *name;
	struct btrfs_balance_control bctl;
	int nr;
	u64 types[MAX_WALK];
	enum btrfs_balance_action counting[MAX_WALK];
	enum btrfs_balance_action relocating[MAX_WALK];
};

/*
 * One pass over chunks of @types, highest logical address first, all of
 * them half used, counted by the walk's own accounting.
 */
static void run_pass(struct kunit *test, struct btrfs_balance_control *bctl,
		     struct btrfs_balance_walk *walk, int nr, const u64 *types,
		     const enum btrfs_balance_action *expected)
{
	int i;

	for (i = 0; i < nr; i++) {
		struct btrfs_balance_chunk chunk = {
			.type = types[i],
			.start = GIB(nr - i),
			.length = GIB(1),
			.used = GIB(1) / 2,
		};
		enum btrfs_balance_action action;

		action = balance_decide_chunk(bctl, walk, &chunk);
		KUNIT_EXPECT_EQ_MSG(test, action, expected[i], "%s, chunk %d",
				    walk->counting ? "counting" : "relocating",
				    i);
		if (!balance_chunk_above_bound(bctl, &chunk))
			balance_walk_account(walk, chunk.type, action);
	}
}

/* Both passes, with the walk's own steps between them. */
static void run_walk(struct kunit *test, struct btrfs_balance_control *bctl,
		     int nr, const u64 *types,
		     const enum btrfs_balance_action *counting,
		     const enum btrfs_balance_action *relocating)
{
	struct btrfs_balance_walk walk = { 0 };

	balance_walk_init(&walk);
	run_pass(test, bctl, &walk, nr, types, counting);
	balance_walk_start_relocation(&walk);
	run_pass(test, bctl, &walk, nr, types, relocating);
	balance_walk_end(&walk, bctl);
}

static void walk_test(struct kunit *test)
{
	const struct walk_case *p = test->param_value;
	struct btrfs_balance_control bctl = p->bctl;
	int i;

	run_walk(test, &bctl, p->nr, p->types, p->counting, p->relocating);
	/* The walk does not write into the request... */
	KUNIT_EXPECT_MEMEQ(test, &bctl.data, &p->bctl.data, sizeof(bctl.data));
	KUNIT_EXPECT_MEMEQ(test, &bctl.meta, &p->bctl.meta, sizeof(bctl.meta));
	KUNIT_EXPECT_MEMEQ(test, &bctl.sys, &p->bctl.sys, sizeof(bctl.sys));
	/* ...but adds what it relocated to what was taken before. */
	for (i = 0; i < BTRFS_BALANCE_NR_TYPES; i++) {
		u64 relocated = 0;
		int j;

		/* The chunks above the bound are not taken against the limits. */
		for (j = 0; j < p->nr; j++)
			if (balance_type_index(p->types[j]) == i &&
			    p->relocating[j] == RELOCATE &&
			    (!p->bctl.bound || GIB(p->nr - j) < p->bctl.bound))
				relocated++;
		KUNIT_EXPECT_EQ_MSG(test, bctl.limit_taken[i],
				    p->bctl.limit_taken[i] + relocated,
				    "type %d", i);
	}
}

#define D	B_DATA
#define M	(B_META | B_DUP)
#define S	(B_SYS | B_DUP)
#define MIXED	(B_DATA | B_META)
#define TAKEN(d, m, s)	.limit_taken = { d, m, s }

static const struct walk_case walk_cases[] = {
	{ "all types, no filter", { .flags = T_ALL }, 3, { D, M, S },
	  { COUNT, COUNT, COUNT }, { RELOCATE, RELOCATE, RELOCATE } },
	{ "data only", { .flags = T_DATA }, 3, { M, D, S },
	  { SKIP, COUNT, SKIP }, { SKIP, RELOCATE, SKIP } },
	{ "usage=40 selects no half used chunk",
	  { .flags = T_ALL, .data = { .flags = A_USAGE, .usage = 40 } }, 2,
	  { D, M }, { SKIP, COUNT }, { SKIP, RELOCATE } },
	{ "data limit=2 of 4 data chunks",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 2 } }, 4,
	  { D, D, D, D }, { COUNT, COUNT, SKIP, SKIP },
	  { RELOCATE, RELOCATE, SKIP, SKIP } },
	{ "limits count per type",
	  { .flags = T_ALL, .data = { .flags = A_LIMIT, .limit = 1 },
	    .meta = { .flags = A_LIMIT, .limit = 2 } }, 6,
	  { M, D, M, D, M, S },
	  { COUNT, COUNT, COUNT, SKIP, SKIP, COUNT },
	  { RELOCATE, RELOCATE, RELOCATE, SKIP, SKIP, RELOCATE } },
	{ "limit=1..3 with 2 chunks: minimum reached",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT_RANGE,
				       .limit_min = 1, .limit_max = 3 } }, 2,
	  { D, D }, { COUNT, COUNT }, { RELOCATE, RELOCATE } },
	{ "limit=3..5 with 2 chunks: minimum not reached",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT_RANGE,
				       .limit_min = 3, .limit_max = 5 } }, 2,
	  { D, D }, { COUNT, COUNT }, { SKIP, SKIP } },
	{ "limit=5 with 3 chunks relocates all 3",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 5 } }, 3,
	  { D, D, D }, { COUNT, COUNT, COUNT },
	  { RELOCATE, RELOCATE, RELOCATE } },
	{ "limit=10 with 6 chunks relocates all 6",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 10 } }, 6,
	  { D, D, D, D, D, D }, { COUNT, COUNT, COUNT, COUNT, COUNT, COUNT },
	  { RELOCATE, RELOCATE, RELOCATE, RELOCATE, RELOCATE, RELOCATE } },
	{ "limit_min of metadata does not hold data back",
	  { .flags = T_ALL, .meta = { .flags = A_LIMIT_RANGE,
				      .limit_min = 3, .limit_max = 5 } }, 3,
	  { D, M, D }, { COUNT, COUNT, COUNT }, { RELOCATE, SKIP, RELOCATE } },
	{ "mixed chunks reach the limit minimum as data",
	  { .flags = T_DATA | T_META,
	    .data = { .flags = A_LIMIT_RANGE, .limit_min = 2,
		      .limit_max = 3 },
	    .meta = { .flags = A_LIMIT_RANGE, .limit_min = 2,
		      .limit_max = 3 } }, 5,
	  { MIXED, MIXED, MIXED, MIXED, S },
	  { COUNT, COUNT, COUNT, SKIP, SKIP },
	  { RELOCATE, RELOCATE, RELOCATE, SKIP, SKIP } },
	{ "mixed chunks below the limit minimum",
	  { .flags = T_DATA | T_META,
	    .data = { .flags = A_LIMIT_RANGE, .limit_min = 3,
		      .limit_max = 4 },
	    .meta = { .flags = A_LIMIT_RANGE, .limit_min = 3,
		      .limit_max = 4 } }, 2,
	  { MIXED, MIXED }, { COUNT, COUNT }, { SKIP, SKIP } },
	{ "mixed chunks count against the data limit",
	  { .flags = T_DATA | T_META,
	    .data = { .flags = A_LIMIT_RANGE, .limit_max = 2 },
	    .meta = { .flags = A_LIMIT_RANGE, .limit_max = 2 } }, 4,
	  { MIXED, MIXED, MIXED, S }, { COUNT, COUNT, SKIP, SKIP },
	  { RELOCATE, RELOCATE, SKIP, SKIP } },
	{ "limit=0 takes nothing",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 0 } }, 2,
	  { D, D }, { SKIP, SKIP }, { SKIP, SKIP } },
	{ "limit=1..2 with 3 chunks: the maximum caps",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT_RANGE,
				       .limit_min = 1, .limit_max = 2 } }, 3,
	  { D, D, D }, { COUNT, COUNT, SKIP }, { RELOCATE, RELOCATE, SKIP } },
	/* A balance resumed after a pause, with what it took before. */
	{ "resumed limit=3 after 2 taken: one more",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 3 },
	    TAKEN(2, 0, 0) }, 3,
	  { D, D, D }, { COUNT, SKIP, SKIP }, { RELOCATE, SKIP, SKIP } },
	{ "resumed limit=2 after 2 taken: nothing",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 2 },
	    TAKEN(2, 0, 0) }, 2,
	  { D, D }, { SKIP, SKIP }, { SKIP, SKIP } },
	{ "resumed limit=2..4 after 1 taken: minimum met with it",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT_RANGE,
				       .limit_min = 2, .limit_max = 4 },
	    TAKEN(1, 0, 0) }, 1,
	  { D }, { COUNT }, { RELOCATE } },
	{ "resumed limit=3..4 after 1 taken, 1 left: below the minimum",
	  { .flags = T_DATA, .data = { .flags = A_LIMIT_RANGE,
				       .limit_min = 3, .limit_max = 4 },
	    TAKEN(1, 0, 0) }, 1,
	  { D }, { COUNT }, { SKIP } },
	/* Chunks at 5, 4, 3, 2 and 1 GiB, the bound at 3 GiB. */
	{ "above the bound only the chunks that lack a convert target",
	  { .flags = T_ALL, .bound = GIB(3),
	    .meta = { .flags = A_CONVERT, .target = B_RAID1 } }, 5,
	  { D, M, B_META | B_RAID1, M, S },
	  { SKIP, COUNT, SKIP, COUNT, COUNT },
	  { SKIP, RELOCATE, SKIP, RELOCATE, RELOCATE } },
	{ "above the bound not taken against the limit",
	  { .flags = T_META, .bound = GIB(3),
	    .meta = { .flags = A_CONVERT | A_LIMIT, .target = B_RAID1,
		      .limit = 1 } }, 4, { M, M, M, M },
	  { COUNT, COUNT, COUNT, SKIP },
	  { RELOCATE, RELOCATE, RELOCATE, SKIP } },
	{ "above the bound nothing without a convert",
	  { .flags = T_ALL, .bound = GIB(3) }, 5, { D, M, S, M, D },
	  { SKIP, SKIP, SKIP, COUNT, COUNT },
	  { SKIP, SKIP, SKIP, RELOCATE, RELOCATE } },
	{ "taken before a pause count per type",
	  { .flags = T_ALL, .data = { .flags = A_LIMIT, .limit = 1 },
	    .meta = { .flags = A_LIMIT, .limit = 1 }, TAKEN(0, 1, 5) }, 5,
	  { M, D, M, D, S }, { SKIP, COUNT, SKIP, SKIP, COUNT },
	  { SKIP, RELOCATE, SKIP, SKIP, RELOCATE } },
};

KUNIT_ARRAY_PARAM_DESC(walk, walk_cases, name);

/* The same limit twice: each walk starts counting from zero... */
static void limit_counts_per_walk_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 2 },
	};
	static const u64 types[] = { D, D, D };
	static const enum btrfs_balance_action two[] = { COUNT, COUNT, SKIP };
	static const enum btrfs_balance_action moved[] = {
		RELOCATE, RELOCATE, SKIP
	};
	static const enum btrfs_balance_action none[] = { SKIP, SKIP, SKIP };

	run_walk(test, &bctl, ARRAY_SIZE(types), types, two, moved);
	KUNIT_EXPECT_EQ(test, bctl.limit_taken[BTRFS_BALANCE_DATA_INDEX], 2ULL);
	/* ...but a resumed one goes on from what the first one took. */
	run_walk(test, &bctl, ARRAY_SIZE(types), types, none, none);
}

/*
 * limit=1, a pause inside the relocation of the first chunk: the chunk is
 * given back, and the resume takes it (it is still there) and no other.
 */
static void chunk_stopped_inside_is_given_back_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 1 },
	};
	static const u64 types[] = { D, D };
	static const enum btrfs_balance_action one[] = { COUNT, SKIP };
	static const enum btrfs_balance_action moved[] = { RELOCATE, SKIP };
	struct btrfs_balance_walk walk = { 0 };

	balance_walk_init(&walk);
	run_pass(test, &bctl, &walk, ARRAY_SIZE(types), types, one);
	balance_walk_start_relocation(&walk);
	run_pass(test, &bctl, &walk, 1, types, moved);
	balance_walk_give_back(&walk, D);
	balance_walk_end(&walk, &bctl);
	KUNIT_EXPECT_EQ(test, bctl.limit_taken[BTRFS_BALANCE_DATA_INDEX], 0ULL);
	run_walk(test, &bctl, ARRAY_SIZE(types), types, one, moved);
	KUNIT_EXPECT_EQ(test, bctl.limit_taken[BTRFS_BALANCE_DATA_INDEX], 1ULL);
}

/* A walk stopped in its counting pass took nothing. */
static void counting_pass_takes_nothing_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 2 },
	};
	static const u64 types[] = { D, D };
	static const enum btrfs_balance_action two[] = { COUNT, COUNT };
	struct btrfs_balance_walk walk = { 0 };

	balance_walk_init(&walk);
	run_pass(test, &bctl, &walk, ARRAY_SIZE(types), types, two);
	balance_walk_end(&walk, &bctl);
	KUNIT_EXPECT_EQ(test, bctl.limit_taken[BTRFS_BALANCE_DATA_INDEX], 0ULL);
}

/*
 * limit_min shares its bytes with the single value limit, which the walk
 * decrements.  The single value limit has no minimum: limit=4 with two
 * matching chunks relocates both, on either byte order.
 */
static void single_limit_has_no_minimum_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_DATA, .data = { .flags = A_LIMIT, .limit = 4 },
	};
	static const u64 types[] = { D, D };
	static const enum btrfs_balance_action counting[] = { COUNT, COUNT };
	static const enum btrfs_balance_action relocating[] = {
		RELOCATE, RELOCATE
	};

	run_walk(test, &bctl, ARRAY_SIZE(types), types, counting, relocating);
}

static struct kunit_case balance_filters_cases[] = {
	KUNIT_CASE_PARAM(profiles_filter_test, profiles_gen_params),
	KUNIT_CASE_PARAM(usage_filter_test, usage_gen_params),
	KUNIT_CASE(usage_filter_2_32_test),
	KUNIT_CASE_PARAM(usage_range_filter_test, usage_range_gen_params),
	KUNIT_CASE_PARAM(devid_filter_test, devid_gen_params),
	KUNIT_CASE_PARAM(drange_filter_test, drange_gen_params),
	KUNIT_CASE_PARAM(vrange_filter_test, vrange_gen_params),
	KUNIT_CASE_PARAM(stripes_filter_test, stripes_gen_params),
	KUNIT_CASE_PARAM(soft_filter_test, soft_gen_params),
	KUNIT_CASE_PARAM(should_balance_chunk_test, combo_gen_params),
	KUNIT_CASE_PARAM(args_of_the_chunk_type_apply_test,
			 chunk_args_gen_params),
	KUNIT_CASE_PARAM(type_index_test, type_index_gen_params),
	KUNIT_CASE_PARAM(walk_test, walk_gen_params),
	KUNIT_CASE(single_limit_has_no_minimum_test),
	KUNIT_CASE(limit_counts_per_walk_test),
	KUNIT_CASE(counting_pass_takes_nothing_test),
	KUNIT_CASE(chunk_stopped_inside_is_given_back_test),
	{}
};

static struct kunit_suite balance_filters_suite = {
	.name = "btrfs_balance_filters",
	.test_cases = balance_filters_cases,
};

/* Requests */

#define CONVERT_TO(t)	{ .flags = A_CONVERT, .target = (t) }
#define USAGE_OF(u)	{ .flags = A_USAGE, .usage = (u) }

struct request_case {
	const char *name;
	struct btrfs_balance_control bctl;
	struct btrfs_balance_fs_state fs;
	int ret;
	/* For reduces_redundancy(): the expected answer. */
	bool reduces;
	/* For check_balance_request(): in the reason, not in the reason. */
	const char *why;
	const char *not_why;
};

#define FS(_n, _data, _meta, _sys)					\
	{ .rw_devices = _n, .avail_data_alloc_bits = _data,		\
	  .avail_metadata_alloc_bits = _meta,				\
	  .avail_system_alloc_bits = _sys }

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

KUNIT_ARRAY_PARAM_DESC(redundancy, redundancy_cases, name);

static void reduces_redundancy_test(struct kunit *test)
{
	const struct request_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, reduces_redundancy(&p->bctl, &p->fs),
			p->reduces);
}

#define OK(_name, _fs, ...)						\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs, .ret = 0 }
#define BAD(_name, _why, _fs, ...)					\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs,		\
	  .ret = -EINVAL, .why = _why }
#define NOSPC(_name, _why, _fs, ...)					\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs,		\
	  .ret = -ENOSPC, .why = _why }
/* The first problem found is reported, not a later one. */
#define FIRST(_name, _why, _not_why, _fs, ...)				\
	{ .name = _name, .bctl = { __VA_ARGS__ }, .fs = _fs,		\
	  .ret = -EINVAL, .why = _why, .not_why = _not_why }
#define ONE_DEV		FS(1, B_SINGLE, B_DUP, B_DUP)
/* @_n rw devices, @_full of them without unallocated space */
#define FULL_FS(_n, _full)						\
	{ .rw_devices = _n, .rw_devices_full = _full,			\
	  .avail_data_alloc_bits = B_SINGLE,				\
	  .avail_metadata_alloc_bits = B_RAID1,			\
	  .avail_system_alloc_bits = B_RAID1 }
#define RAID1_FS(_n)	FS(_n, B_SINGLE, B_RAID1, B_RAID1)
#define MIXED_FS(_n)	{ .rw_devices = _n, .mixed = true }
#define BAD_CONVERT(name)	"invalid convert " name " profile"
#define REDUCES		"reduces metadata redundancy"

#define ALL_ARGS_FLAGS	(BTRFS_BALANCE_ARGS_MASK | A_CONVERT | A_SOFT)

static const struct request_case request_cases[] = {
	OK("usage on every type", ONE_DEV, .flags = T_ALL,
	   .data = USAGE_OF(50), .meta = USAGE_OF(50), .sys = USAGE_OF(50)),
	OK("no type flag", ONE_DEV, .flags = 0),
	OK("force and resume are known", ONE_DEV,
	   .flags = BTRFS_BALANCE_FORCE | BTRFS_BALANCE_RESUME | T_DATA),
	OK("every args flag is known", RAID1_FS(2), .flags = T_DATA,
	   .data = { .flags = ALL_ARGS_FLAGS & ~A_LIMIT, .target = B_RAID1,
		     .usage_min = 10, .usage_max = 20, .limit_min = 1,
		     .limit_max = 2, .stripes_min = 1, .stripes_max = 2,
		     .pend = 1, .vend = 1 }),
	BAD("balance flag bit 5", "0x20 in balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(5)),
	BAD("balance flag bit 6", "0x40 in balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(6)),
	BAD("balance flag bit 7", "0x80 in balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(7)),
	BAD("balance flag bit 10", "0x400 in balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(10)),
	OK("dry run is known", ONE_DEV,
	   .flags = BTRFS_BALANCE_DRY_RUN | T_DATA),
	BAD("dry run of a balance to resume",
	    "dry run flag on a balance to resume", ONE_DEV,
	    .flags = BTRFS_BALANCE_DRY_RUN | BTRFS_BALANCE_RESUME | T_DATA),
	BAD("balance flag bit 9", "0x200 in balance flags", ONE_DEV,
	    .flags = T_DATA | BIT_ULL(9)),
	BAD("balance flag bit 63", "0x8000000000000000 in balance flags",
	    ONE_DEV, .flags = T_DATA | BIT_ULL(63)),
	BAD("data args bit 11", "0x800 in data flags", ONE_DEV,
	    .flags = T_DATA, .data = { .flags = A_USAGE | BIT_ULL(11) }),
	BAD("metadata args bit 63", "in metadata flags", ONE_DEV,
	    .flags = T_META, .meta = { .flags = BIT_ULL(63) }),
	BAD("system args bit 11", "0x800 in system flags", ONE_DEV,
	    .flags = T_SYS, .sys = { .flags = BIT_ULL(11) }),
	FIRST("balance flags before args", "balance flags", "data", ONE_DEV,
	      .flags = T_DATA | BIT_ULL(5), .data = { .flags = BIT_ULL(11) }),
	FIRST("data args before metadata args", "data", "metadata", ONE_DEV,
	      .flags = T_DATA | T_META, .data = { .flags = BIT_ULL(11) },
	      .meta = { .flags = BIT_ULL(63) }),
	FIRST("metadata args before system args", "metadata", "system",
	      ONE_DEV, .flags = T_META | T_SYS,
	      .meta = { .flags = BIT_ULL(11) },
	      .sys = { .flags = BIT_ULL(11) }),
	FIRST("args before mixed", "data", "mixed", MIXED_FS(1),
	      .flags = T_DATA, .data = { .flags = BIT_ULL(11) }),
	BAD("limit and limit range", "limit and limit range together in data",
	    ONE_DEV, .flags = T_DATA,
	    .data = { .flags = A_LIMIT | A_LIMIT_RANGE, .limit = 5 }),
	BAD("inverted limit range", "inverted limit range 5..2 in metadata",
	    ONE_DEV, .flags = T_META,
	    .meta = { .flags = A_LIMIT_RANGE, .limit_min = 5,
		      .limit_max = 2 }),
	OK("limit range of one value", ONE_DEV, .flags = T_META,
	   .meta = { .flags = A_LIMIT_RANGE, .limit_min = 2, .limit_max = 2 }),
	OK("limit=0", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_LIMIT, .limit = 0 }),
	OK("usage=100", ONE_DEV, .flags = T_DATA, .data = USAGE_OF(100)),
	BAD("usage=101", "usage 101 above 100 in data", ONE_DEV,
	    .flags = T_DATA, .data = USAGE_OF(101)),
	BAD("usage=2^32", "usage 4294967296 above 100 in system", ONE_DEV,
	    .flags = T_SYS, .sys = USAGE_OF(BIT_ULL(32))),
	BAD("usage=U64_MAX", "above 100 in data", ONE_DEV, .flags = T_DATA,
	    .data = USAGE_OF(U64_MAX)),
	OK("usage above 100 without the usage flag", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_DEVID, .devid = 1, .usage = 1000 }),
	OK("usage range 0..0", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_USAGE_RANGE }),
	OK("usage range 100..100", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_USAGE_RANGE, .usage_min = 100,
		     .usage_max = 100 }),
	OK("usage range with an open end", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_USAGE_RANGE, .usage_min = 20,
		     .usage_max = U32_MAX }),
	OK("usage range with both usage flags", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_USAGE | A_USAGE_RANGE, .usage_min = 20,
		     .usage_max = 60 }),
	BAD("usage range from 101", "usage range minimum 101 above 100", ONE_DEV,
	    .flags = T_DATA, .data = { .flags = A_USAGE_RANGE,
				       .usage_min = 101, .usage_max = 200 }),
	BAD("inverted usage range", "inverted usage range 70..30 in data",
	    ONE_DEV, .flags = T_DATA,
	    .data = { .flags = A_USAGE_RANGE, .usage_min = 70,
		      .usage_max = 30 }),
	BAD("inverted usage range with both usage flags",
	    "inverted usage range 70..30", ONE_DEV, .flags = T_DATA,
	    .data = { .flags = A_USAGE | A_USAGE_RANGE, .usage_min = 70,
		      .usage_max = 30 }),
	BAD("inverted drange", "inverted drange 8192..4096 in data", ONE_DEV,
	    .flags = T_DATA, .data = { .flags = A_DEVID | A_DRANGE,
				       .devid = 1, .pstart = 8192,
				       .pend = 4096 }),
	OK("empty drange", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_DEVID | A_DRANGE, .devid = 1, .pstart = 4096,
		     .pend = 4096 }),
	BAD("inverted vrange", "inverted vrange 1..0 in metadata", ONE_DEV,
	    .flags = T_META, .meta = { .flags = A_VRANGE, .vstart = 1 }),
	OK("vrange over everything", ONE_DEV, .flags = T_META,
	   .meta = { .flags = A_VRANGE, .vend = U64_MAX }),
	BAD("inverted stripes range", "inverted stripes range 4..2 in system",
	    ONE_DEV, .flags = T_SYS,
	    .sys = { .flags = A_STRIPES, .stripes_min = 4, .stripes_max = 2 }),
	OK("inverted values without their flags", ONE_DEV, .flags = T_DATA,
	   .data = { .flags = A_PROFILES, .profiles = B_SINGLE,
		     .usage_min = 70, .usage_max = 30, .pstart = 2,
		     .pend = 1, .vstart = 2, .vend = 1, .stripes_min = 4,
		     .stripes_max = 2 }),
	FIRST("unknown flags before values", "unknown", "inverted", ONE_DEV,
	      .flags = T_DATA | T_META,
	      .data = { .flags = A_VRANGE, .vstart = 1 },
	      .meta = { .flags = BIT_ULL(12) }),
	FIRST("values before mixed", "usage 150", "mixed", MIXED_FS(1),
	      .flags = T_DATA, .data = USAGE_OF(150)),
	OK("mixed: identical usage", MIXED_FS(1), .flags = T_DATA | T_META,
	   .data = USAGE_OF(50), .meta = USAGE_OF(50)),
	OK("mixed: identical converts", MIXED_FS(2), .flags = T_DATA | T_META,
	   .data = CONVERT_TO(B_RAID1), .meta = CONVERT_TO(B_RAID1)),
	OK("mixed: system alone", MIXED_FS(1), .flags = T_SYS,
	   .sys = USAGE_OF(50)),
	OK("not mixed: data alone", ONE_DEV, .flags = T_DATA,
	   .data = USAGE_OF(50)),
	BAD("mixed: data alone", "mixed", MIXED_FS(1), .flags = T_DATA,
	    .data = USAGE_OF(50), .meta = USAGE_OF(50)),
	BAD("mixed: metadata without data", "mixed", MIXED_FS(1),
	    .flags = T_META | T_SYS, .data = USAGE_OF(50),
	    .meta = USAGE_OF(50)),
	BAD("mixed: different usage", "mixed", MIXED_FS(1),
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
	    RAID1_FS(3), .flags = T_SYS | BTRFS_BALANCE_FORCE,
	    .sys = CONVERT_TO(B_RAID1C4)),
	BAD("data to raid6 on 2 devices", BAD_CONVERT("data"), RAID1_FS(2),
	    DATA_TO(B_RAID6)),
	BAD("data to anything with no rw device", BAD_CONVERT("data"),
	    FS(0, B_SINGLE, B_DUP, B_DUP), DATA_TO(B_DUP)),
	/* A valid profile, but no device to put a chunk on. */
	NOSPC("metadata to single with no rw device", "needs 1 devices",
	      FS(0, B_SINGLE, B_DUP, B_DUP),
	      .flags = T_META | BTRFS_BALANCE_FORCE,
	      .meta = CONVERT_TO(B_SINGLE)),
	OK("data to single with no rw device: not refused here",
	   FS(0, B_SINGLE, B_DUP, B_DUP), DATA_TO(B_SINGLE)),
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
	   .flags = T_META | BTRFS_BALANCE_FORCE,
	   .meta = CONVERT_TO(B_SINGLE)),
	BAD("system dup to single", REDUCES, ONE_DEV, SYS_TO(B_SINGLE)),
	OK("system dup to single, forced", ONE_DEV,
	   .flags = T_SYS | BTRFS_BALANCE_FORCE, .sys = CONVERT_TO(B_SINGLE)),
	OK("data raid1 to single needs no force",
	   FS(2, B_RAID1, B_RAID1, B_RAID1), DATA_TO(B_SINGLE)),
	FIRST("mixed before convert", "mixed", "invalid", MIXED_FS(1),
	      .flags = T_DATA | T_META, .data = CONVERT_TO(B_RAID1C4),
	      .meta = USAGE_OF(50)),
	FIRST("data convert before metadata convert", BAD_CONVERT("data"),
	      BAD_CONVERT("metadata"), RAID1_FS(2), .flags = T_DATA | T_META,
	      .data = CONVERT_TO(B_RAID1C4), .meta = CONVERT_TO(B_RAID1C4)),
	FIRST("convert before redundancy", BAD_CONVERT("data"), "redundancy",
	      RAID1_FS(2), .flags = T_DATA | T_SYS,
	      .data = CONVERT_TO(B_RAID1C4), .sys = CONVERT_TO(B_SINGLE)),
	NOSPC("system to raid6, 2 of 3 devices full",
	      "cannot convert system to raid6: it needs 3 devices with unallocated space, only 1 of 3 have some",
	      FULL_FS(3, 2), .flags = T_SYS | BTRFS_BALANCE_FORCE,
	      .sys = CONVERT_TO(B_RAID6)),
	OK("system to raid6, every device with space", FULL_FS(3, 0),
	   .flags = T_SYS | BTRFS_BALANCE_FORCE, .sys = CONVERT_TO(B_RAID6)),
	NOSPC("metadata to raid1c3, 1 of 3 devices full",
	      "cannot convert metadata to raid1c3: it needs 3 devices",
	      FULL_FS(3, 1), META_TO(B_RAID1C3)),
	OK("metadata to raid1, 1 of 3 devices full: 2 are enough",
	   FULL_FS(3, 1), META_TO(B_RAID1)),
	OK("data to single, every device full: not refused here", FULL_FS(2, 2),
	   DATA_TO(B_SINGLE)),
	OK("data to raid1, a resume, 2 of 3 full: not refused", FULL_FS(3, 2),
	   .flags = T_DATA | BTRFS_BALANCE_RESUME,
	   .data = CONVERT_TO(B_RAID1)),
	OK("no convert, every device full: usage filter", FULL_FS(2, 2),
	   .flags = T_DATA, .data = USAGE_OF(50)),
	OK("data to dup, the only device full: not refused here",
	   FULL_FS(1, 1), DATA_TO(B_DUP)),
	/* Its own chunks may have filled the devices: never refused. */
	OK("metadata to raid1, a resume, 2 of 3 full: not refused",
	   FULL_FS(3, 2), .flags = T_META | BTRFS_BALANCE_RESUME,
	   .meta = CONVERT_TO(B_RAID1)),
	OK("system to raid6, a resume, 2 of 3 full: not refused",
	   FULL_FS(3, 2), .flags = T_SYS | BTRFS_BALANCE_FORCE |
	   BTRFS_BALANCE_RESUME, .sys = CONVERT_TO(B_RAID6)),
	NOSPC("metadata to raid1, a new balance, 2 of 3 full",
	      "cannot convert metadata to raid1: it needs 2 devices",
	      FULL_FS(3, 2), META_TO(B_RAID1)),
	OK("data raid10 with 2 of 4 full: devs_min 2", FULL_FS(4, 2),
	   DATA_TO(B_RAID10)),
	FIRST("redundancy before space", REDUCES, "cannot convert",
	      FULL_FS(2, 2), META_TO(B_SINGLE)),
};

KUNIT_ARRAY_PARAM_DESC(request, request_cases, name);

static void check_request_test(struct kunit *test)
{
	const struct request_case *p = test->param_value;
	char why[128] = "";

	KUNIT_ASSERT_EQ(test, check_balance_request(&p->bctl, &p->fs, why,
						    sizeof(why)),
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
	const struct btrfs_balance_control bctl = { DATA_TO(B_RAID1C4) };
	const struct btrfs_balance_fs_state fs = { .rw_devices = 1 };
	char why[16];

	memset(why, 'X', sizeof(why));
	KUNIT_EXPECT_EQ(test, check_balance_request(&bctl, &fs, why, 8),
			-EINVAL);
	KUNIT_EXPECT_STREQ(test, why, "invalid");
	KUNIT_EXPECT_NULL(test, memchr_inv(why + 8, 'X', sizeof(why) - 8));
}

/*
 * A resumed balance cannot know what was done before it was interrupted:
 * converts turn on soft, the others get usage=90 unless they filter by
 * usage already.
 */
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

KUNIT_ARRAY_PARAM_DESC(resume, resume_cases, name);

static void update_balance_args_test(struct kunit *test)
{
	const struct resume_case *p = test->param_value;
	struct btrfs_balance_control bctl = {
		.flags = T_ALL | BTRFS_BALANCE_RESUME,
		.data = p->in, .meta = p->in, .sys = p->in,
	};

	update_balance_args(&bctl);
	KUNIT_EXPECT_MEMEQ(test, &bctl.data, &p->out, sizeof(p->out));
	KUNIT_EXPECT_MEMEQ(test, &bctl.meta, &p->out, sizeof(p->out));
	KUNIT_EXPECT_MEMEQ(test, &bctl.sys, &p->out, sizeof(p->out));
	KUNIT_EXPECT_EQ(test, bctl.flags, T_ALL | BTRFS_BALANCE_RESUME);
}

/* Each type is updated from its own args. */
static void update_balance_args_per_type_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_ALL,
		.data = CONVERT_TO(B_RAID1),
		.meta = USAGE_OF(20),
		.sys = {},
	};

	update_balance_args(&bctl);
	KUNIT_EXPECT_EQ(test, bctl.data.flags, A_CONVERT | A_SOFT);
	KUNIT_EXPECT_EQ(test, bctl.meta.flags, A_USAGE);
	KUNIT_EXPECT_EQ(test, bctl.meta.usage, 20ULL);
	KUNIT_EXPECT_EQ(test, bctl.sys.flags, A_USAGE);
	KUNIT_EXPECT_EQ(test, bctl.sys.usage, 90ULL);
}

/*
 * A resume from an item with a bound keeps the args it started with, one
 * from an older kernel's item (no bound) gets the heuristic.
 */
struct resume_args_case {
	const char *name;
	u64 bound;
	struct btrfs_balance_args in;
	struct btrfs_balance_args out;
};

static const struct resume_args_case resume_args_cases[] = {
	{ "no filter, bound: unchanged", SZ_1G, {}, {} },
	{ "no filter, no bound: usage=90", 0, {}, USAGE_OF(90) },
	{ "convert, bound: no soft", SZ_1G, CONVERT_TO(B_RAID1),
	  CONVERT_TO(B_RAID1) },
	{ "convert, no bound: soft", 0, CONVERT_TO(B_RAID1),
	  { .flags = A_CONVERT | A_SOFT, .target = B_RAID1 } },
	{ "limit, bound: unchanged", SZ_1G, { .flags = A_LIMIT, .limit = 5 },
	  { .flags = A_LIMIT, .limit = 5 } },
	{ "usage=95, bound: unchanged", SZ_1G, USAGE_OF(95), USAGE_OF(95) },
};

KUNIT_ARRAY_PARAM_DESC(resume_args, resume_args_cases, name);

static void resume_args_test(struct kunit *test)
{
	const struct resume_args_case *p = test->param_value;
	struct btrfs_balance_control bctl = {
		.flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
			 BTRFS_BALANCE_SYSTEM | BTRFS_BALANCE_RESUME,
		.data = p->in, .meta = p->in, .sys = p->in, .bound = p->bound,
	};

	balance_resume_args(&bctl);
	KUNIT_EXPECT_MEMEQ(test, &bctl.data, &p->out, sizeof(p->out));
	KUNIT_EXPECT_MEMEQ(test, &bctl.meta, &p->out, sizeof(p->out));
	KUNIT_EXPECT_MEMEQ(test, &bctl.sys, &p->out, sizeof(p->out));
	KUNIT_EXPECT_EQ(test, bctl.bound, p->bound);
}

/* Every field has its own value, and no two bytes of a value are equal. */
static void fill_cpu_args(struct btrfs_balance_args *cpu)
{
	memset(cpu, 0xee, sizeof(*cpu));
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

static void args_to_disk_test(struct kunit *test)
{
	struct btrfs_balance_args cpu;
	struct btrfs_disk_balance_args disk;
	static const u8 zero[sizeof(disk.unused)];

	fill_cpu_args(&cpu);
	memset(&disk, 0xff, sizeof(disk));
	btrfs_cpu_balance_args_to_disk(&disk, &cpu);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.profiles), cpu.profiles);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.usage), cpu.usage);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.devid), cpu.devid);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.pstart), cpu.pstart);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.pend), cpu.pend);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.vstart), cpu.vstart);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.vend), cpu.vend);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.target), cpu.target);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.flags), cpu.flags);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.limit), cpu.limit);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(disk.stripes_min), cpu.stripes_min);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(disk.stripes_max), cpu.stripes_max);
	/* The rest of the item's args is written as zeroes. */
	KUNIT_EXPECT_EQ(test, le64_to_cpu(disk.limit_taken), 0ULL);
	KUNIT_EXPECT_MEMEQ(test, disk.unused, zero, sizeof(zero));
}

/* The balance item keeps the layout older kernels and btrfs-progs read. */
static void balance_item_layout_test(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, sizeof(struct btrfs_disk_balance_args), 136);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_disk_balance_args,
				       limit_taken), 88);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_balance_item, bound), 416);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_balance_item, completed),
			424);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_balance_item,
				       chunks_below_bound), 432);
	KUNIT_EXPECT_EQ(test, sizeof(struct btrfs_balance_item), 448);
}

/* The fields added to the ioctl args take from unused[], nothing moves. */
static void ioctl_args_layout_test(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args, stat),
			424);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args,
				       ext_flags), 448);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args, types),
			456);
	KUNIT_EXPECT_EQ(test, sizeof(struct btrfs_balance_type_progress), 32);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args,
				       start_time), 552);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args,
				       run_time_ms), 560);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args,
				       current_start), 568);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args,
				       current_used), 592);
	KUNIT_EXPECT_EQ(test, offsetof(struct btrfs_ioctl_balance_args, unused),
			600);
	KUNIT_EXPECT_EQ(test, sizeof(struct btrfs_ioctl_balance_args), 1024);
}

/*
 * limit=3..5 and two chunks found: the relocation pass takes none, so the
 * estimate has none.  A minimum that is met, or no limit range, keeps what
 * was found.
 */
static void scan_limit_min_test(struct kunit *test)
{
	const struct btrfs_balance_control bctl = {
		.flags = T_ALL,
		.data = { .flags = A_LIMIT_RANGE, .limit_min = 3,
			  .limit_max = 5 },
		.meta = { .flags = A_LIMIT_RANGE, .limit_min = 2,
			  .limit_max = 5 },
		.sys = { .flags = A_LIMIT, .limit = 3 },
	};
	struct btrfs_balance_scan scan = {
		.chunks = { 2, 2, 1 },
		.bytes = { SZ_1G, SZ_512M, SZ_32M },
		.used = { SZ_256M, SZ_16M, SZ_16K },
	};

	balance_scan_limit_min(&scan, &bctl);
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_DATA_INDEX], 0);
	KUNIT_EXPECT_EQ(test, scan.bytes[BTRFS_BALANCE_DATA_INDEX], 0);
	KUNIT_EXPECT_EQ(test, scan.used[BTRFS_BALANCE_DATA_INDEX], 0);
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_META_INDEX], 2);
	KUNIT_EXPECT_EQ(test, scan.used[BTRFS_BALANCE_META_INDEX], SZ_16M);
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_SYS_INDEX], 1);
	KUNIT_EXPECT_EQ(test, scan.used[BTRFS_BALANCE_SYS_INDEX], SZ_16K);
}

/* A dry run reports its scan per type; what the caller sent is replaced. */
static void scan_to_args_test(struct kunit *test)
{
	struct btrfs_balance_scan scan = {
		.chunks = { 3, 2, 1 },
		.bytes = { SZ_1G, SZ_512M, SZ_32M },
		.used = { SZ_256M, SZ_16M, SZ_16K },
	};
	struct btrfs_ioctl_balance_args bargs;
	int i;

	memset(&bargs, 0xff, sizeof(bargs));
	bargs.flags = BTRFS_BALANCE_DRY_RUN | T_ALL;
	balance_scan_to_args(&scan, &bargs);
	KUNIT_EXPECT_EQ(test, bargs.flags, BTRFS_BALANCE_DRY_RUN | T_ALL);
	KUNIT_EXPECT_EQ(test, bargs.ext_flags, BTRFS_BALANCE_EXT_ESTIMATE);
	KUNIT_EXPECT_EQ(test, bargs.state, 0);
	KUNIT_EXPECT_EQ(test, bargs.stat.expected, 6);
	KUNIT_EXPECT_EQ(test, bargs.stat.considered, 0);
	KUNIT_EXPECT_EQ(test, bargs.stat.completed, 0);
	for (i = 0; i < BTRFS_BALANCE_NR_TYPES; i++) {
		KUNIT_EXPECT_EQ(test, bargs.types[i].chunks_expected,
				scan.chunks[i]);
		KUNIT_EXPECT_EQ(test, bargs.types[i].bytes_expected,
				scan.used[i]);
		KUNIT_EXPECT_EQ(test, bargs.types[i].chunks_done, 0);
		KUNIT_EXPECT_EQ(test, bargs.types[i].bytes_done, 0);
	}
}

/*
 * Where the walks of a balance start: below its bound if it has one, for a
 * convert too, as the chunks made at or above the bound have the target
 * profile of the convert, unless a dropped convert made some in the old one.
 */
struct walk_first_case {
	const char *name;
	u64 bound;
	u64 data_flags;
	u64 first;
	bool unconverted_above_bound;
};

static const struct walk_first_case walk_first_cases[] = {
	{ "no bound (older item): from the top", 0, 0, U64_MAX },
	{ "bound at the end of a 1 GiB chunk", SZ_2G, 0, SZ_2G - 1 },
	{ "bound of a chunk at 0 of 1 byte", 1, 0, 0 },
	{ "bound at the top of the address space", U64_MAX, 0, U64_MAX - 1 },
	{ "filters but no convert: below the bound", SZ_2G,
	  BTRFS_BALANCE_ARGS_USAGE | BTRFS_BALANCE_ARGS_SOFT, SZ_2G - 1 },
	{ "a convert: below the bound, a target chunk at it is not work",
	  SZ_2G, BTRFS_BALANCE_ARGS_CONVERT, SZ_2G - 1 },
	{ "a convert of an older item: from the top", 0,
	  BTRFS_BALANCE_ARGS_CONVERT, U64_MAX },
	{ "a convert with chunks above the bound to convert: from the top",
	  SZ_2G, BTRFS_BALANCE_ARGS_CONVERT, U64_MAX, true },
};

KUNIT_ARRAY_PARAM_DESC(walk_first, walk_first_cases, name);

static void walk_first_test(struct kunit *test)
{
	const struct walk_first_case *p = test->param_value;
	const struct btrfs_balance_control bctl = {
		.flags = BTRFS_BALANCE_DATA,
		.bound = p->bound,
		.data.flags = p->data_flags,
		.data.target = BTRFS_BLOCK_GROUP_RAID1,
		.unconverted_above_bound = p->unconverted_above_bound,
	};

	KUNIT_EXPECT_EQ(test, balance_walk_first(&bctl), p->first);
}

/*
 * The progress of a run counts the chunks relocated by the runs before it
 * as expected, considered and completed: the whole balance.  Without a
 * bound it starts from zero.
 */
static void stat_restart_test(struct kunit *test)
{
	const struct btrfs_balance_progress before = {
		.expected = 40, .considered = 35, .completed = 12,
	};
	struct btrfs_balance_control fresh = {};
	struct btrfs_balance_control resumed = {
		.stat = before, .bound = SZ_1G,
	};
	struct btrfs_balance_control older = { .stat = before };

	balance_stat_restart(&fresh);
	KUNIT_EXPECT_EQ(test, fresh.stat.expected, 0);
	KUNIT_EXPECT_EQ(test, fresh.stat.considered, 0);
	KUNIT_EXPECT_EQ(test, fresh.stat.completed, 0);

	balance_stat_restart(&resumed);
	KUNIT_EXPECT_EQ(test, resumed.stat.expected, 12);
	KUNIT_EXPECT_EQ(test, resumed.stat.considered, 12);
	KUNIT_EXPECT_EQ(test, resumed.stat.completed, 12);

	balance_stat_restart(&older);
	KUNIT_EXPECT_EQ(test, older.stat.expected, 0);
	KUNIT_EXPECT_EQ(test, older.stat.considered, 0);
	KUNIT_EXPECT_EQ(test, older.stat.completed, 0);
}

/* A bound a balance item can have: 0, or the end of a chunk. */
struct bound_valid_case {
	const char *name;
	u64 bound;
	bool valid;
};

static const struct bound_valid_case bound_valid_cases[] = {
	{ "no bound (older kernels)", 0, true },
	{ "the end of a chunk", SZ_1G + SZ_256M, true },
	{ "half a sector past it", SZ_1G + SZ_2K, false },
	{ "the highest that leaves room for a chunk",
	  round_down(U64_MAX - BTRFS_MAX_DATA_CHUNK_SIZE, SZ_4K), true },
	{ "a sector higher", round_down(U64_MAX - BTRFS_MAX_DATA_CHUNK_SIZE,
					SZ_4K) + SZ_4K, false },
};

KUNIT_ARRAY_PARAM_DESC(bound_valid, bound_valid_cases, name);

static void bound_valid_test(struct kunit *test)
{
	const struct bound_valid_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, btrfs_balance_bound_valid(p->bound, SZ_4K),
			p->valid);
}

/*
 * The counts of a balance item are kept when the chunks below its bound are
 * those they were written with; else they start from zero, the bound stays.
 */
struct item_counts_case {
	const char *name;
	u64 stamp;
	u64 below;
	bool kept;
};

static const struct item_counts_case item_counts_cases[] = {
	{ "as many chunks below the bound as stamped: kept", 5, 5, true },
	{ "all relocated, none stamped: kept", 0, 0, true },
	{ "fewer: an older kernel relocated some: from zero", 5, 3, false },
	{ "all gone but stamped: from zero", 5, 0, false },
	{ "more than stamped: from zero", 3, 4, false },
};

KUNIT_ARRAY_PARAM_DESC(item_counts, item_counts_cases, name);

static void keep_item_counts_test(struct kunit *test)
{
	const struct item_counts_case *p = test->param_value;
	struct btrfs_balance_control bctl = {
		.bound = SZ_4G,
		.stat = { .completed = 7 },
		.limit_taken = { 2, 1, 3 },
	};
	const u64 none[BTRFS_BALANCE_NR_TYPES] = {};
	bool kept;

	kept = balance_keep_item_counts(&bctl, p->stamp, p->below);
	KUNIT_EXPECT_EQ(test, kept, p->kept);
	KUNIT_EXPECT_EQ(test, bctl.bound, SZ_4G);
	if (p->kept) {
		KUNIT_EXPECT_EQ(test, bctl.stat.completed, 7);
		KUNIT_EXPECT_EQ(test, bctl.limit_taken[0], 2);
		KUNIT_EXPECT_EQ(test, bctl.limit_taken[1], 1);
		KUNIT_EXPECT_EQ(test, bctl.limit_taken[2], 3);
	} else {
		KUNIT_EXPECT_EQ(test, bctl.stat.completed, 0);
		KUNIT_EXPECT_MEMEQ(test, bctl.limit_taken, none, sizeof(none));
	}
}

/* The same per type: what was relocated is expected again, bytes too. */
static void types_restart_test(struct kunit *test)
{
	const struct btrfs_balance_type_progress before = {
		.chunks_expected = 9, .chunks_done = 4,
		.bytes_expected = SZ_1G, .bytes_done = SZ_256M,
	};
	struct btrfs_balance_control resumed = {
		.types = { before, before, before }, .bound = SZ_1G,
	};
	struct btrfs_balance_control older = {
		.types = { before, before, before },
	};
	int i;

	balance_stat_restart(&resumed);
	balance_stat_restart(&older);
	for (i = 0; i < BTRFS_BALANCE_NR_TYPES; i++) {
		KUNIT_EXPECT_EQ(test, resumed.types[i].chunks_expected, 4);
		KUNIT_EXPECT_EQ(test, resumed.types[i].chunks_done, 4);
		KUNIT_EXPECT_EQ(test, resumed.types[i].bytes_expected, SZ_256M);
		KUNIT_EXPECT_EQ(test, resumed.types[i].bytes_done, SZ_256M);
		KUNIT_EXPECT_EQ(test, older.types[i].chunks_expected, 0);
		KUNIT_EXPECT_EQ(test, older.types[i].chunks_done, 0);
		KUNIT_EXPECT_EQ(test, older.types[i].bytes_expected, 0);
		KUNIT_EXPECT_EQ(test, older.types[i].bytes_done, 0);
	}
}

/*
 * The counting pass adds each chunk to its type, a mixed one to data; the
 * relocation pass adds the same bytes as done.
 */
static void progress_per_type_test(struct kunit *test)
{
	const struct btrfs_balance_chunk chunks[] = {
		{ .type = B_DATA, .used = SZ_64M },
		{ .type = B_DATA | B_META, .used = SZ_1M },
		{ .type = B_META | B_RAID1, .used = SZ_16M },
		{ .type = B_SYS | B_DUP, .used = SZ_16K },
	};
	struct btrfs_balance_control bctl = {};
	struct btrfs_balance_type_progress *data, *meta, *sys;
	int i;

	data = &bctl.types[BTRFS_BALANCE_DATA_INDEX];
	meta = &bctl.types[BTRFS_BALANCE_META_INDEX];
	sys = &bctl.types[BTRFS_BALANCE_SYS_INDEX];
	for (i = 0; i < ARRAY_SIZE(chunks); i++)
		balance_progress_count(&bctl, &chunks[i]);
	KUNIT_EXPECT_EQ(test, bctl.stat.expected, 4);
	KUNIT_EXPECT_EQ(test, data->chunks_expected, 2);
	KUNIT_EXPECT_EQ(test, data->bytes_expected, SZ_64M + SZ_1M);
	KUNIT_EXPECT_EQ(test, meta->chunks_expected, 1);
	KUNIT_EXPECT_EQ(test, meta->bytes_expected, SZ_16M);
	KUNIT_EXPECT_EQ(test, sys->chunks_expected, 1);
	KUNIT_EXPECT_EQ(test, sys->bytes_expected, SZ_16K);

	balance_progress_relocated(&bctl, &chunks[1]);
	balance_progress_relocated(&bctl, &chunks[2]);
	KUNIT_EXPECT_EQ(test, bctl.stat.completed, 2);
	KUNIT_EXPECT_EQ(test, data->chunks_done, 1);
	KUNIT_EXPECT_EQ(test, data->bytes_done, SZ_1M);
	KUNIT_EXPECT_EQ(test, meta->chunks_done, 1);
	KUNIT_EXPECT_EQ(test, meta->bytes_done, SZ_16M);
	KUNIT_EXPECT_EQ(test, sys->chunks_done, 0);
	KUNIT_EXPECT_EQ(test, sys->bytes_done, 0);
	/* What the count took is untouched. */
	KUNIT_EXPECT_EQ(test, data->chunks_expected, 2);
	KUNIT_EXPECT_EQ(test, data->bytes_expected, SZ_64M + SZ_1M);

	balance_progress_relocated(&bctl, &chunks[0]);
	balance_progress_relocated(&bctl, &chunks[3]);
	for (i = 0; i < BTRFS_BALANCE_NR_TYPES; i++) {
		KUNIT_EXPECT_EQ(test, bctl.types[i].chunks_done,
				bctl.types[i].chunks_expected);
		KUNIT_EXPECT_EQ(test, bctl.types[i].bytes_done,
				bctl.types[i].bytes_expected);
	}
	KUNIT_EXPECT_EQ(test, bctl.stat.completed, bctl.stat.expected);
}

/*
 * A chunk that got extents relocated from another one after it was
 * counted: what was expected grows, done does not pass it.
 */
static void progress_chunk_grew_test(struct kunit *test)
{
	struct btrfs_balance_chunk counted = { .type = B_DATA, .used = SZ_1M };
	struct btrfs_balance_chunk other = { .type = B_DATA, .used = SZ_2M };
	struct btrfs_balance_control bctl = {};
	struct btrfs_balance_type_progress *data;

	data = &bctl.types[BTRFS_BALANCE_DATA_INDEX];
	balance_progress_count(&bctl, &counted);
	balance_progress_count(&bctl, &other);
	/* other's extents went into counted's free space. */
	counted.used += other.used;
	balance_progress_relocated(&bctl, &other);
	KUNIT_EXPECT_EQ(test, data->bytes_done, SZ_2M);
	KUNIT_EXPECT_EQ(test, data->bytes_expected, SZ_1M + SZ_2M);
	balance_progress_relocated(&bctl, &counted);
	KUNIT_EXPECT_EQ(test, data->bytes_done, SZ_2M + SZ_1M + SZ_2M);
	KUNIT_EXPECT_EQ(test, data->bytes_expected, data->bytes_done);
	KUNIT_EXPECT_EQ(test, data->chunks_done, data->chunks_expected);
}

/* The sysfs file: every line, with the values of the balance. */
static void progress_format_test(struct kunit *test)
{
	const struct btrfs_balance_control bctl = {
		.stat = { .expected = 7, .considered = 5, .completed = 3 },
		.start_time = 1733000000,
		.run_time_ms = 60000,
		.run_start_ns = NSEC_PER_SEC,
		.relocating = { .start = SZ_4G, .length = SZ_1G,
				.type = B_DATA | B_RAID1, .used = SZ_256M },
		.types = {
			{ 4, 2, SZ_1G, SZ_512M },
			{ 2, 1, SZ_32M, SZ_8M },
			{ 1, 0, SZ_16K, 0 },
		},
	};
	const char *expected =
		"state running\nstart_time 1733000000\nrun_time_ms 62000\n"
		"chunks_expected 7\nchunks_considered 5\nchunks_done 3\n"
		"data_chunks_expected 4\ndata_chunks_done 2\n"
		"data_bytes_expected 1073741824\ndata_bytes_done 536870912\n"
		"metadata_chunks_expected 2\nmetadata_chunks_done 1\n"
		"metadata_bytes_expected 33554432\nmetadata_bytes_done 8388608\n"
		"system_chunks_expected 1\nsystem_chunks_done 0\n"
		"system_bytes_expected 16384\nsystem_bytes_done 0\n"
		"current_start 4294967296\ncurrent_length 1073741824\n"
		"current_used 268435456\ncurrent_type data\n"
		"current_profile raid1\nout_of_room none\n";
	/* A page, as sysfs gives: sysfs_emit() refuses anything else. */
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	int len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = balance_progress_format(&bctl, true, 3 * NSEC_PER_SEC, buf);
	KUNIT_EXPECT_STREQ(test, buf, expected);
	KUNIT_EXPECT_EQ(test, len, strlen(expected));

	/* A paused balance between two chunks. */
	len = balance_progress_format(&bctl, false, 3 * NSEC_PER_SEC, buf);
	KUNIT_EXPECT_TRUE(test, str_has_prefix(buf, "state paused\n"));
}

/* The converts stopped for want of room, with their targets. */
static void progress_format_out_of_room_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_ALL,
		.sys = { .flags = A_CONVERT, .target = B_RAID1C3 },
		.meta = { .flags = A_CONVERT, .target = B_RAID1 },
		.convert_dropped = BIT(BTRFS_BALANCE_META_INDEX),
	};
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, buf);
	balance_progress_format(&bctl, false, 0, buf);
	KUNIT_EXPECT_NOT_NULL(test, strstr(buf, "\nout_of_room metadata:raid1\n"));
	set_bit(BTRFS_BALANCE_SYS_INDEX, &bctl.convert_dropped);
	balance_progress_format(&bctl, false, 0, buf);
	KUNIT_EXPECT_NOT_NULL(test,
			      strstr(buf, "\nout_of_room metadata:raid1 system:raid1c3\n"));
	bctl.convert_dropped = 0;
	balance_progress_format(&bctl, false, 0, buf);
	KUNIT_EXPECT_NOT_NULL(test, strstr(buf, "\nout_of_room none\n"));
}

/* Without a balance: the same lines, with state none and zeroes. */
static void progress_format_none_test(struct kunit *test)
{
	const char *suffix =
		"\ncurrent_type none\ncurrent_profile none\nout_of_room none\n";
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	int len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = balance_progress_format(NULL, false, NSEC_PER_SEC, buf);
	KUNIT_EXPECT_TRUE(test, str_has_prefix(buf,
					       "state none\nstart_time 0\nrun_time_ms 0\n"));
	KUNIT_EXPECT_NOT_NULL(test, strstr(buf, "\nsystem_bytes_done 0\n"));
	KUNIT_EXPECT_EQ(test, len, strlen(buf));
	KUNIT_ASSERT_GT(test, len, strlen(suffix));
	KUNIT_EXPECT_STREQ(test, buf + len - strlen(suffix), suffix);
}

/* How long a balance ran: the runs before, and this one while it runs. */
struct run_time_case {
	const char *name;
	u64 run_time_ms;
	u64 run_start_ns;
	u64 now_ns;
	u64 expected;
};

static const struct run_time_case run_time_cases[] = {
	{ "paused: the runs before only", 1500, 0, 9 * NSEC_PER_SEC, 1500 },
	{ "running: plus this run", 1500, 2 * NSEC_PER_SEC,
	  9 * NSEC_PER_SEC + 999999, 8500 },
	{ "a first run that just started", 0, NSEC_PER_SEC, NSEC_PER_SEC, 0 },
	{ "a clock behind the start adds nothing", 1500, 9 * NSEC_PER_SEC,
	  2 * NSEC_PER_SEC, 1500 },
	{ "a sum that would wrap stays at the maximum", U64_MAX - 1,
	  NSEC_PER_SEC, 3 * NSEC_PER_SEC, U64_MAX },
};

KUNIT_ARRAY_PARAM_DESC(run_time, run_time_cases, name);

static void run_time_test(struct kunit *test)
{
	const struct run_time_case *p = test->param_value;
	const struct btrfs_balance_control bctl = {
		.run_time_ms = p->run_time_ms,
		.run_start_ns = p->run_start_ns,
	};

	KUNIT_EXPECT_EQ(test, balance_run_time_ms(&bctl, p->now_ns),
			p->expected);
}

/* The progress ioctl gets the balance's progress, in all and per type. */
static void progress_to_args_test(struct kunit *test)
{
	static const struct btrfs_balance_control bctl = {
		.stat = { .expected = 7, .considered = 5, .completed = 3 },
		.start_time = 1733000000,
		.run_time_ms = 60000,
		.run_start_ns = 2 * NSEC_PER_SEC,
		.relocating = { .start = SZ_4G, .length = SZ_1G,
				.type = B_DATA | B_RAID1, .used = SZ_256M },
		.types = {
			{ 4, 2, SZ_1G, SZ_512M },
			{ 2, 1, SZ_32M, SZ_8M },
			{ 1, 0, SZ_16K, 0 },
		},
	};
	struct btrfs_ioctl_balance_args bargs = { .ext_flags = U64_MAX };
	static const u64 zero[ARRAY_SIZE(bargs.unused)];

	balance_progress_to_args(&bctl, 5 * NSEC_PER_SEC, &bargs);
	KUNIT_EXPECT_EQ(test, bargs.ext_flags, BTRFS_BALANCE_EXT_PROGRESS);
	KUNIT_EXPECT_EQ(test, bargs.start_time, 1733000000);
	KUNIT_EXPECT_EQ(test, bargs.run_time_ms, 60000 + 3000);
	KUNIT_EXPECT_EQ(test, bargs.current_start, SZ_4G);
	KUNIT_EXPECT_EQ(test, bargs.current_length, SZ_1G);
	KUNIT_EXPECT_EQ(test, bargs.current_type, B_DATA | B_RAID1);
	KUNIT_EXPECT_EQ(test, bargs.current_used, SZ_256M);
	KUNIT_EXPECT_MEMEQ(test, &bargs.stat, &bctl.stat, sizeof(bctl.stat));
	KUNIT_EXPECT_MEMEQ(test, bargs.types, bctl.types, sizeof(bctl.types));
	KUNIT_EXPECT_MEMEQ(test, bargs.unused, zero, sizeof(zero));
}

static void args_to_cpu_test(struct kunit *test)
{
	struct btrfs_disk_balance_args disk;
	struct btrfs_balance_args cpu, expected;

	fill_cpu_args(&expected);
	memset(expected.unused, 0, sizeof(expected.unused));
	memset(&disk, 0x5a, sizeof(disk));
	disk.profiles = cpu_to_le64(expected.profiles);
	disk.usage = cpu_to_le64(expected.usage);
	disk.devid = cpu_to_le64(expected.devid);
	disk.pstart = cpu_to_le64(expected.pstart);
	disk.pend = cpu_to_le64(expected.pend);
	disk.vstart = cpu_to_le64(expected.vstart);
	disk.vend = cpu_to_le64(expected.vend);
	disk.target = cpu_to_le64(expected.target);
	disk.flags = cpu_to_le64(expected.flags);
	disk.limit = cpu_to_le64(expected.limit);
	disk.stripes_min = cpu_to_le32(expected.stripes_min);
	disk.stripes_max = cpu_to_le32(expected.stripes_max);

	memset(&cpu, 0xff, sizeof(cpu));
	btrfs_disk_balance_args_to_cpu(&cpu, &disk);
	/* Reserved bytes on disk do not reach the ioctl struct. */
	KUNIT_EXPECT_MEMEQ(test, &cpu, &expected, sizeof(cpu));
}

/* The start/resume message: what "balance: start" is followed by. */
struct describe_case {
	const char *name;
	struct btrfs_balance_control bctl;
	u32 size;
	const char *text;
};

#define DESCRIBE(_name, _text, ...)					\
	{ .name = _name, .text = _text, .size = 1024,			\
	  .bctl = { __VA_ARGS__ } }
#define CUT(_name, _size, _text, ...)					\
	{ .name = _name, .text = _text, .size = _size,			\
	  .bctl = { __VA_ARGS__ } }

static const struct describe_case describe_cases[] = {
	DESCRIBE("no type", ""),
	DESCRIBE("data, no filter", "-d", .flags = T_DATA),
	DESCRIBE("force first, then data, metadata, system",
		 "-f -d -m -s",
		 .flags = T_SYS | T_META | T_DATA | BTRFS_BALANCE_FORCE),
	DESCRIBE("resume is not a filter", "-dusage=90",
		 .flags = T_DATA | BTRFS_BALANCE_RESUME,
		 .data = USAGE_OF(90)),
	DESCRIBE("convert and soft", "-dconvert=raid1,soft",
		 .flags = T_DATA,
		 .data = { .flags = A_CONVERT | A_SOFT, .target = B_RAID1 }),
	DESCRIBE("convert to single", "-mconvert=single", .flags = T_META,
		 .meta = CONVERT_TO(B_SINGLE)),
	DESCRIBE("profiles", "-sprofiles=raid1|raid10", .flags = T_SYS,
		 .sys = { .flags = A_PROFILES,
			  .profiles = B_RAID1 | B_RAID10 }),
	DESCRIBE("usage range", "-dusage=10..20", .flags = T_DATA,
		 .data = { .flags = A_USAGE_RANGE, .usage_min = 10,
			   .usage_max = 20 }),
	DESCRIBE("usage range with the usage flag too", "-dusage=0..60",
		 .flags = T_DATA,
		 .data = { .flags = A_USAGE | A_USAGE_RANGE, .usage_min = 0,
			   .usage_max = 60 }),
	DESCRIBE("devid and drange", "-ddevid=2,drange=4096..8192",
		 .flags = T_DATA,
		 .data = { .flags = A_DEVID | A_DRANGE, .devid = 2,
			   .pstart = 4096, .pend = 8192 }),
	DESCRIBE("vrange and stripes", "-mvrange=0..1048576,stripes=2..4",
		 .flags = T_META,
		 .meta = { .flags = A_VRANGE | A_STRIPES, .vend = MIB(1),
			   .stripes_min = 2, .stripes_max = 4 }),
	DESCRIBE("limit", "-dlimit=7", .flags = T_DATA,
		 .data = { .flags = A_LIMIT, .limit = 7 }),
	DESCRIBE("limit range", "-dlimit=2..5", .flags = T_DATA,
		 .data = { .flags = A_LIMIT_RANGE, .limit_min = 2,
			   .limit_max = 5 }),
	DESCRIBE("args of an unselected type are not shown", "-musage=30",
		 .flags = T_META, .data = USAGE_OF(50), .meta = USAGE_OF(30)),
	DESCRIBE("every type with filters", "-dusage=50 -musage=30 -susage=10",
		 .flags = T_ALL, .data = USAGE_OF(50), .meta = USAGE_OF(30),
		 .sys = USAGE_OF(10)),
	DESCRIBE("metadata without filters after data with filters",
		 "-dusage=50 -m", .flags = T_DATA | T_META,
		 .data = USAGE_OF(50)),
	DESCRIBE("as btrfs-progs sends -dusage=50 -m",
		 "-dusage=50 -m -s", .flags = T_ALL, .data = USAGE_OF(50)),
	DESCRIBE("system without filters after metadata with filters",
		 "-d -mconvert=dup -s", .flags = T_ALL,
		 .meta = CONVERT_TO(B_DUP)),
	CUT("cut after the last piece that fits", 20, "-dusage=50",
	    .flags = T_DATA | T_META, .data = USAGE_OF(50),
	    .meta = USAGE_OF(30)),
	/* The first piece has nothing before it to fall back to. */
	CUT("the first piece is cut where the buffer ends", 22,
	    "-dconvert=raid1,usage",
	    .flags = T_DATA, .data = { .flags = A_CONVERT | A_USAGE,
				       .target = B_RAID1, .usage = 50 }),
};

KUNIT_ARRAY_PARAM_DESC(describe, describe_cases, name);

static void describe_test(struct kunit *test)
{
	const struct describe_case *p = test->param_value;
	char buf[1024 + 8];

	memset(buf, 'X', sizeof(buf));
	describe_balance_control(&p->bctl, buf, p->size);
	KUNIT_EXPECT_STREQ(test, buf, p->text);
	/* Nothing is written past the size. */
	KUNIT_EXPECT_NULL(test, memchr_inv(buf + p->size, 'X',
					   sizeof(buf) - p->size));
}

/* How a run ended, from what __btrfs_balance() returned and the requests. */
struct outcome_case {
	const char *name;
	int ret;
	bool pause_req;
	bool cancel_req;
	enum btrfs_balance_outcome outcome;
	bool out_of_room;
};

static const struct outcome_case outcome_cases[] = {
	{ "done", 0, false, false, BTRFS_BALANCE_ENDED },
	{ "done with a pause asked too late", 0, true, false,
	  BTRFS_BALANCE_ENDED },
	{ "stopped by a pause request", -ECANCELED, true, false,
	  BTRFS_BALANCE_PAUSED },
	{ "stopped by a cancel request", -ECANCELED, false, true,
	  BTRFS_BALANCE_CANCELED },
	{ "stopped by a fatal signal in relocation", -ECANCELED, false, false,
	  BTRFS_BALANCE_CANCELED },
	{ "stopped by a fatal signal in a reservation", -EINTR, false, false,
	  BTRFS_BALANCE_CANCELED },
	{ "fatal signal while a pause was asked", -EINTR, true, false,
	  BTRFS_BALANCE_CANCELED },
	{ "pause and cancel both asked: cancel", -ECANCELED, true, true,
	  BTRFS_BALANCE_CANCELED },
	{ "pause and cancel asked, fatal signal: cancel", -EINTR, true, true,
	  BTRFS_BALANCE_CANCELED },
	{ "ENOSPC", -ENOSPC, false, false, BTRFS_BALANCE_ENDED },
	{ "ENOSPC with a pause asked", -ENOSPC, true, false,
	  BTRFS_BALANCE_ENDED },
	{ "I/O error", -EIO, false, true, BTRFS_BALANCE_ENDED },
	{ .name = "a convert out of room", .ret = -ENOSPC, .out_of_room = true,
	  .outcome = BTRFS_BALANCE_PAUSED },
	{ .name = "a convert out of room, a pause asked", .ret = -ENOSPC,
	  .pause_req = true, .out_of_room = true,
	  .outcome = BTRFS_BALANCE_PAUSED },
	{ .name = "a convert out of room, a cancel asked", .ret = -ENOSPC,
	  .cancel_req = true, .out_of_room = true,
	  .outcome = BTRFS_BALANCE_ENDED },
	{ .name = "out of room, then canceled", .ret = -ECANCELED,
	  .cancel_req = true, .out_of_room = true,
	  .outcome = BTRFS_BALANCE_CANCELED },
	{ .name = "out of room, then a fatal signal", .ret = -EINTR,
	  .out_of_room = true, .outcome = BTRFS_BALANCE_CANCELED },
	{ .name = "out of room, then a fatal signal in relocation",
	  .ret = -ECANCELED, .out_of_room = true,
	  .outcome = BTRFS_BALANCE_CANCELED },
	{ .name = "out of room, yet done", .ret = 0, .out_of_room = true,
	  .outcome = BTRFS_BALANCE_ENDED },
};

KUNIT_ARRAY_PARAM_DESC(outcome, outcome_cases, name);

static void run_outcome_test(struct kunit *test)
{
	const struct outcome_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, balance_run_outcome(p->ret, p->pause_req,
						  p->cancel_req, p->out_of_room),
			p->outcome);
}

/*
 * Args of a type the request does not select are cleared before anything
 * reads them: a convert target there must not steer the allocator.
 */
struct unselected_case {
	const char *name;
	u64 flags;
	bool data_kept;
	bool meta_kept;
	bool sys_kept;
};

static const struct unselected_case unselected_cases[] = {
	{ "all selected", T_ALL, true, true, true },
	{ "data only", T_DATA, true, false, false },
	{ "metadata only", T_META, false, true, false },
	{ "system and force", T_SYS | BTRFS_BALANCE_FORCE, false, false, true },
	{ "resume with data and metadata", T_DATA | T_META |
	  BTRFS_BALANCE_RESUME, true, true, false },
	{ "nothing selected", 0, false, false, false },
};

KUNIT_ARRAY_PARAM_DESC(unselected, unselected_cases, name);

static void unselected_args_are_cleared_test(struct kunit *test)
{
	const struct unselected_case *p = test->param_value;
	const struct btrfs_balance_args to_raid1 = CONVERT_TO(B_RAID1);
	const struct btrfs_balance_args none = {};
	struct btrfs_balance_control bctl = {
		.flags = p->flags, .data = to_raid1, .meta = to_raid1,
		.sys = to_raid1,
	};

	clear_unselected_balance_args(&bctl);
	KUNIT_EXPECT_MEMEQ(test, &bctl.data, p->data_kept ? &to_raid1 : &none,
			   sizeof(none));
	KUNIT_EXPECT_MEMEQ(test, &bctl.meta, p->meta_kept ? &to_raid1 : &none,
			   sizeof(none));
	KUNIT_EXPECT_MEMEQ(test, &bctl.sys, p->sys_kept ? &to_raid1 : &none,
			   sizeof(none));
	KUNIT_EXPECT_EQ(test, bctl.flags, p->flags);
	/* New metadata chunks follow a metadata convert only if selected. */
	KUNIT_EXPECT_EQ(test, get_restripe_target(&bctl, B_META),
			p->meta_kept ? (B_META | B_RAID1) : 0);
}

/* A target the devices cannot hold, of a type not selected, is no error. */
static void unselected_convert_is_not_checked_test(struct kunit *test)
{
	struct btrfs_balance_control bctl = {
		.flags = T_DATA, .data = USAGE_OF(50),
		.meta = CONVERT_TO(B_RAID1C4),
		.sys = { .flags = BIT_ULL(40) },
	};
	const struct btrfs_balance_fs_state fs = ONE_DEV;
	char why[128] = "";

	clear_unselected_balance_args(&bctl);
	KUNIT_EXPECT_EQ_MSG(test, check_balance_request(&bctl, &fs, why,
							sizeof(why)),
			    0, "why: %s", why);
}

/* What a request may ask, and how it is logged. */
static struct kunit_case balance_requests_cases[] = {
	KUNIT_CASE_PARAM(reduces_redundancy_test, redundancy_gen_params),
	KUNIT_CASE_PARAM(check_request_test, request_gen_params),
	KUNIT_CASE(check_request_why_is_bounded_test),
	KUNIT_CASE_PARAM(describe_test, describe_gen_params),
	KUNIT_CASE_PARAM(unselected_args_are_cleared_test,
			 unselected_gen_params),
	KUNIT_CASE(unselected_convert_is_not_checked_test),
	{}
};

static struct kunit_suite balance_requests_suite = {
	.name = "btrfs_balance_requests",
	.test_cases = balance_requests_cases,
};

/* The balance item, and what a resume walks with it. */
static struct kunit_case balance_resume_cases[] = {
	KUNIT_CASE_PARAM(update_balance_args_test, resume_gen_params),
	KUNIT_CASE(update_balance_args_per_type_test),
	KUNIT_CASE_PARAM(resume_args_test, resume_args_gen_params),
	KUNIT_CASE(args_to_disk_test),
	KUNIT_CASE(args_to_cpu_test),
	KUNIT_CASE(balance_item_layout_test),
	KUNIT_CASE_PARAM(walk_first_test, walk_first_gen_params),
	KUNIT_CASE(stat_restart_test),
	KUNIT_CASE_PARAM(keep_item_counts_test, item_counts_gen_params),
	KUNIT_CASE_PARAM(bound_valid_test, bound_valid_gen_params),
	KUNIT_CASE(types_restart_test),
	{}
};

static struct kunit_suite balance_resume_suite = {
	.name = "btrfs_balance_resume",
	.test_cases = balance_resume_cases,
};

/* The progress of a balance, in the ioctl and in sysfs. */
static struct kunit_case balance_progress_cases[] = {
	KUNIT_CASE(ioctl_args_layout_test),
	KUNIT_CASE(scan_to_args_test),
	KUNIT_CASE(scan_limit_min_test),
	KUNIT_CASE(progress_per_type_test),
	KUNIT_CASE(progress_chunk_grew_test),
	KUNIT_CASE(progress_to_args_test),
	KUNIT_CASE_PARAM(run_time_test, run_time_gen_params),
	KUNIT_CASE(progress_format_test),
	KUNIT_CASE(progress_format_none_test),
	KUNIT_CASE(progress_format_out_of_room_test),
	KUNIT_CASE_PARAM(run_outcome_test, outcome_gen_params),
	{}
};

static struct kunit_suite balance_progress_suite = {
	.name = "btrfs_balance_progress",
	.test_cases = balance_progress_cases,
};

/* Placing a profile on devices, and the space check of a convert. */

/* Place all that fits: the profile's capacity. */
#define ALL		U64_MAX

struct place_case {
	const char *name;
	u64 profile;
	/* MiB available on each device */
	u64 devs[4];
	int num_devs;
	u64 needed;
	u64 expected;
};

static const struct place_case place_cases[] = {
	{ "single on two equal devices", B_DATA, { 100, 100 }, 2,
	  ALL, MIB(200) },
	{ "raid0 on two unequal devices: single on the rest", B_RAID0,
	  { 100, 60 }, 2, ALL, MIB(160) },
	{ "raid1 on two equal devices", B_RAID1, { 100, 100 }, 2,
	  ALL, MIB(100) },
	{ "raid1 on two unequal devices: the smaller one", B_RAID1,
	  { 100, 60 }, 2, ALL, MIB(60) },
	{ "raid1 on three uneven devices: half of all", B_RAID1,
	  { 100, 60, 50 }, 3, ALL, MIB(105) },
	{ "raid1 on three uneven devices: all but the largest", B_RAID1,
	  { 100, 30, 20 }, 3, ALL, MIB(50) },
	{ "raid1 on three equal devices", B_RAID1, { 100, 100, 100 }, 3,
	  ALL, MIB(150) },
	{ "raid1 on one device: nothing", B_RAID1, { 100 }, 1, ALL, 0 },
	{ "raid10 on four equal devices", B_RAID10, { 100, 100, 100, 100 }, 4,
	  ALL, MIB(200) },
	{ "raid10 on four unequal devices", B_RAID10, { 100, 100, 60, 60 }, 4,
	  ALL, MIB(160) },
	{ "raid10 on three devices: two at a time", B_RAID10,
	  { 100, 100, 100 }, 3, ALL, MIB(150) },
	{ "raid5 on three equal devices", B_RAID5, { 100, 100, 100 }, 3,
	  ALL, MIB(200) },
	{ "raid5 on three unequal devices: two on the rest", B_RAID5,
	  { 100, 100, 50 }, 3, ALL, MIB(150) },
	{ "raid6 on four equal devices", B_RAID6, { 100, 100, 100, 100 }, 4,
	  ALL, MIB(200) },
	{ "raid6 on four uneven devices", B_RAID6, { 100, 80, 60, 40 }, 4,
	  ALL, MIB(100) },
	{ "raid6 on three unequal devices: not on two", B_RAID6,
	  { 100, 100, 50 }, 3, ALL, MIB(50) },
	{ "dup on one device: half of it", B_DUP, { 100 }, 1,
	  ALL, MIB(50) },
	{ "dup on two devices: half of both", B_DUP, { 100, 60 }, 2,
	  ALL, MIB(80) },
	{ "raid1c3 on three equal devices", B_RAID1C3, { 100, 100, 100 }, 3,
	  ALL, MIB(100) },
	{ "raid1c4 on three devices: nothing", B_RAID1C4, { 100, 100, 100 }, 3,
	  ALL, 0 },
	{ "space below a stripe length is not used", B_RAID1, { 100, 0 }, 2,
	  ALL, 0 },
	{ "raid1 just fits", B_RAID1, { 100, 100 }, 2,
	  MIB(100), MIB(100) },
	{ "raid1 one byte over", B_RAID1, { 100, 100 }, 2,
	  MIB(100) + 1, MIB(100) },
	{ "raid1 on three uneven devices just fits", B_RAID1,
	  { 100, 60, 50 }, 3, MIB(105), MIB(105) },
	{ "raid1 on three uneven devices one byte over", B_RAID1,
	  { 100, 60, 50 }, 3, MIB(105) + 1, MIB(105) },
	{ "raid6 just fits", B_RAID6, { 100, 100, 100, 100 }, 4,
	  MIB(200), MIB(200) },
	{ "raid6 one byte over", B_RAID6, { 100, 100, 100, 100 }, 4,
	  MIB(200) + 1, MIB(200) },
	{ "dup on one device just fits", B_DUP, { 100 }, 1,
	  MIB(50), MIB(50) },
	{ "dup on one device one byte over", B_DUP, { 100 }, 1,
	  MIB(50) + 1, MIB(50) },
	{ "less than a stripe length needed", B_RAID1, { 100, 100 }, 2,
	  1, 1 },
};

KUNIT_ARRAY_PARAM_DESC(place, place_cases, name);

static void place_profile_test(struct kunit *test)
{
	const struct place_case *p = test->param_value;
	u64 avail[ARRAY_SIZE(p->devs)];
	int i;

	for (i = 0; i < p->num_devs; i++)
		avail[i] = MIB(p->devs[i]);
	/* 1 MiB stripes, as check_balance_space() uses for small devices */
	KUNIT_EXPECT_EQ(test, balance_place_profile(p->profile, avail,
						    p->num_devs, p->needed,
						    SZ_1M),
			p->expected);
}

/* What is placed is taken from the devices, one copy on each. */
static void place_profile_takes_the_space_test(struct kunit *test)
{
	u64 avail[3] = { MIB(100), MIB(100), MIB(10) };

	KUNIT_EXPECT_EQ(test, balance_place_profile(B_RAID1, avail, 3,
						    MIB(30), SZ_1M),
			MIB(30));
	/* 30 MiB twice, on the devices with the most space. */
	KUNIT_EXPECT_EQ(test, avail[0] + avail[1] + avail[2], MIB(150));
	KUNIT_EXPECT_EQ(test, avail[0], MIB(70));
	KUNIT_EXPECT_EQ(test, avail[1], MIB(70));
	KUNIT_EXPECT_EQ(test, avail[2], MIB(10));
}

/* Large stripes place less on uneven devices: what the step size is for. */
static void place_profile_stripe_size_test(struct kunit *test)
{
	u64 avail[3] = { MIB(100), MIB(60), MIB(50) };

	KUNIT_EXPECT_EQ(test, balance_place_profile(B_RAID1, avail, 3, ALL,
						    MIB(64)),
			MIB(100));
}

static void scan_add_test(struct kunit *test)
{
	struct btrfs_balance_space_dev devs[3] = {
		{ .devid = 1 }, { .devid = 3 }, { .devid = 4 },
	};
	struct btrfs_balance_scan scan = { .num_devs = 3, .devs = devs };
	struct btrfs_balance_stripe stripes[2] = {
		{ .devid = 3, .offset = SZ_1M }, { .devid = 4, .offset = SZ_1M },
	};
	struct btrfs_balance_chunk raid1 = {
		.start = SZ_1G, .length = MIB(256), .type = B_DATA | B_RAID1,
		.used = MIB(40), .num_stripes = 2, .stripes = stripes,
	};
	struct btrfs_balance_chunk raid0 = {
		.start = 2ULL * SZ_1G, .length = MIB(256),
		.type = B_META | B_RAID0, .used = MIB(8), .num_stripes = 2,
		.stripes = stripes,
	};
	struct btrfs_balance_control bctl = { .flags = T_ALL };

	bctl.data.flags = A_CONVERT;
	bctl.data.target = B_RAID1C3;
	bctl.meta.flags = A_USAGE;
	bctl.meta.usage = 90;

	balance_scan_add(&scan, &bctl, &raid1);
	balance_scan_add(&scan, &bctl, &raid0);
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_DATA_INDEX], 1);
	KUNIT_EXPECT_EQ(test, scan.bytes[BTRFS_BALANCE_DATA_INDEX], MIB(256));
	KUNIT_EXPECT_EQ(test, scan.used[BTRFS_BALANCE_DATA_INDEX], MIB(40));
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_META_INDEX], 1);
	KUNIT_EXPECT_EQ(test, scan.used[BTRFS_BALANCE_META_INDEX], MIB(8));
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_SYS_INDEX], 0);
	/* A raid1 stripe is the whole chunk; metadata does not convert. */
	KUNIT_EXPECT_EQ(test, devs[0].freed, 0);
	KUNIT_EXPECT_EQ(test, devs[1].freed, MIB(256));
	KUNIT_EXPECT_EQ(test, devs[2].freed, MIB(256));
}

/* The room a convert finds in the chunks of its target that it keeps. */
static void scan_keep_test(struct kunit *test)
{
	struct btrfs_balance_scan scan = { 0 };
	struct btrfs_balance_chunk dup = {
		.length = MIB(32), .type = B_DATA | B_DUP, .used = MIB(4),
	};
	struct btrfs_balance_chunk full = {
		.length = MIB(32), .type = B_DATA | B_DUP, .used = MIB(32),
	};
	struct btrfs_balance_chunk single = {
		.length = MIB(8), .type = B_DATA, .used = MIB(1),
	};
	struct btrfs_balance_chunk meta = {
		.length = MIB(32), .type = B_META | B_DUP, .used = MIB(1),
	};
	struct btrfs_balance_control bctl = { .flags = T_ALL };

	bctl.data.flags = A_CONVERT | A_SOFT;
	bctl.data.target = B_DUP;
	bctl.meta.flags = A_USAGE;
	bctl.meta.usage = 90;

	balance_scan_keep(&scan, &bctl, &dup);
	balance_scan_keep(&scan, &bctl, &full);
	balance_scan_keep(&scan, &bctl, &single);
	balance_scan_keep(&scan, &bctl, &meta);
	/* Only the dup data chunk with room: metadata does not convert. */
	KUNIT_EXPECT_EQ(test, scan.room[BTRFS_BALANCE_DATA_INDEX], MIB(28));
	KUNIT_EXPECT_EQ(test, scan.room[BTRFS_BALANCE_META_INDEX], 0);
	KUNIT_EXPECT_EQ(test, scan.chunks[BTRFS_BALANCE_DATA_INDEX], 0);
}

struct space_case {
	const char *name;
	/* Extended convert targets, 0 when that type does not convert. */
	u64 data_target;
	u64 meta_target;
	/* MiB, per device */
	u64 unallocated[4];
	u64 freed[4];
	int num_devs;
	/* MiB used in the chunks relocated, data and metadata */
	u64 data_used;
	u64 meta_used;
	int expected;
	/* In the reason, for -ENOSPC */
	const char *why;
	/* MiB free in the data chunks of the target that are kept */
	u64 data_room;
};

static const struct space_case space_cases[] = {
	{ "single to raid1 fits in the space single frees", B_RAID1, 0,
	  { 200, 200 }, { 200, 0 }, 2, 200, 0, 0, NULL },
	{ "single to raid1 does not fit", B_RAID1, 0,
	  { 50, 50 }, { 100, 0 }, 2, 100, 0, -ENOSPC,
	  "data to raid1: it needs 104857600 bytes, the devices have room for 52428800" },
	{ "raid1 to single fits in what raid1 frees", B_SINGLE, 0,
	  { 0, 0 }, { 100, 100 }, 2, 100, 0, 0, NULL },
	{ "raid1 on three uneven devices just fits", B_RAID1, 0,
	  { 100, 60, 50 }, { 0, 0, 0 }, 3, 105, 0, 0, NULL },
	{ "raid1 on three uneven devices, 1 MiB over", B_RAID1, 0,
	  { 100, 60, 50 }, { 0, 0, 0 }, 3, 106, 0, -ENOSPC,
	  "it needs 111149056 bytes, the devices have room for 110100480" },
	{ "dup to raid1 on one device", 0, B_RAID1,
	  { 500 }, { 0 }, 1, 0, 10, -ENOSPC,
	  "metadata to raid1: it needs 10485760 bytes, the devices have room for 0" },
	{ "single to dup on one device", B_DUP, 0,
	  { 100 }, { 100 }, 1, 100, 0, 0, NULL },
	{ "data takes the space metadata needs", B_RAID1, B_RAID1,
	  { 100, 100 }, { 0, 0 }, 2, 95, 10, -ENOSPC,
	  "metadata to raid1: it needs 10485760 bytes, the devices have room for 5242880" },
	{ "data and metadata both fit", B_RAID1, B_RAID1,
	  { 100, 100 }, { 0, 0 }, 2, 90, 10, 0, NULL },
	{ "raid10 on four devices", B_RAID10, 0,
	  { 100, 100, 100, 100 }, { 0, 0, 0, 0 }, 4, 200, 0, 0, NULL },
	{ "raid5 on three devices, over", B_RAID5, 0,
	  { 100, 100, 50 }, { 0, 0, 0 }, 3, 151, 0, -ENOSPC,
	  "cannot convert data to raid5" },
	{ "no convert: nothing to check", 0, 0,
	  { 0, 0 }, { 0, 0 }, 2, 1000, 1000, 0, NULL },
	{ "a convert with nothing to relocate", B_RAID1C4, 0,
	  { 0, 0 }, { 0, 0 }, 2, 0, 0, 0, NULL },
	/* A soft convert stopped half way, on a full device. */
	{ "soft single to dup: the dup chunks hold it", B_DUP, 0,
	  { 0 }, { 8 }, 1, 8, 0, 0, NULL, 28 },
	{ "soft single to dup: the dup chunks hold half", B_DUP, 0,
	  { 0 }, { 8 }, 1, 16, 0, -ENOSPC,
	  "data to dup: it needs 8388608 bytes, the devices have room for 4194304",
	  8 },
	{ "soft single to dup: no room kept, as before", B_DUP, 0,
	  { 0 }, { 8 }, 1, 8, 0, -ENOSPC,
	  "data to dup: it needs 8388608 bytes, the devices have room for 4194304",
	  0 },
};

KUNIT_ARRAY_PARAM_DESC(space, space_cases, name);

static void check_space_test(struct kunit *test)
{
	const struct space_case *p = test->param_value;
	struct btrfs_balance_space_dev devs[ARRAY_SIZE(p->unallocated)] = { 0 };
	struct btrfs_balance_scan scan = {
		.num_devs = p->num_devs, .devs = devs,
	};
	struct btrfs_balance_control bctl = { .flags = T_ALL };
	u64 avail[ARRAY_SIZE(p->unallocated)];
	char why[160] = "";
	int i;

	for (i = 0; i < p->num_devs; i++) {
		devs[i].devid = i + 1;
		devs[i].unallocated = MIB(p->unallocated[i]);
		devs[i].freed = MIB(p->freed[i]);
	}
	scan.used[BTRFS_BALANCE_DATA_INDEX] = MIB(p->data_used);
	scan.room[BTRFS_BALANCE_DATA_INDEX] = MIB(p->data_room);
	scan.used[BTRFS_BALANCE_META_INDEX] = MIB(p->meta_used);
	init_type_args(&bctl.data, p->data_target, RUNNING);
	init_type_args(&bctl.meta, p->meta_target, RUNNING);
	init_type_args(&bctl.sys, 0, RUNNING);

	KUNIT_EXPECT_EQ(test, check_balance_space(&bctl, &scan, avail, why,
						  sizeof(why)),
			p->expected);
	if (p->why)
		KUNIT_EXPECT_NOT_NULL_MSG(test, strstr(why, p->why), "%s", why);
}

static struct kunit_case balance_space_cases[] = {
	KUNIT_CASE_PARAM(place_profile_test, place_gen_params),
	KUNIT_CASE(place_profile_takes_the_space_test),
	KUNIT_CASE(place_profile_stripe_size_test),
	KUNIT_CASE(scan_add_test),
	KUNIT_CASE(scan_keep_test),
	KUNIT_CASE_PARAM(check_space_test, space_gen_params),
	{}
};

static struct kunit_suite balance_space_suite = {
	.name = "btrfs_balance_space",
	.test_cases = balance_space_cases,
};

kunit_test_suites(&balance_profiles_suite, &balance_filters_suite,
		  &balance_requests_suite, &balance_resume_suite,
		  &balance_progress_suite, &balance_space_suite);
