/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The balance ioctls as the series lays them out (docs/abi.md), for the
 * repository's userspace programs that build with any distribution's
 * headers: tools/balance-status.c and bench/upstream_dry_run.c.  The kernel
 * facts (ioctl numbers, bits, struct layouts) are those of the uapi; the
 * names have their own prefixes, so that this file goes with any version
 * of <linux/btrfs.h> or without it.  Sizes and offsets are checked when a
 * program builds.
 */
#ifndef RESTRIPER_BALANCE_ABI_H
#define RESTRIPER_BALANCE_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* The top-level flags of a request (BTRFS_BALANCE_*) */
#define BALANCE_DATA		(1ULL << 0)
#define BALANCE_SYSTEM		(1ULL << 1)
#define BALANCE_METADATA	(1ULL << 2)
#define BALANCE_TYPES		(BALANCE_DATA | BALANCE_SYSTEM | BALANCE_METADATA)
#define BALANCE_FORCE		(1ULL << 3)
#define BALANCE_DRY_RUN		(1ULL << 8)	/* the series only */

/* The filters of one type (BTRFS_BALANCE_ARGS_*) */
#define ARGS_PROFILES		(1ULL << 0)
#define ARGS_USAGE		(1ULL << 1)
#define ARGS_DEVID		(1ULL << 2)
#define ARGS_DRANGE		(1ULL << 3)
#define ARGS_VRANGE		(1ULL << 4)
#define ARGS_LIMIT		(1ULL << 5)
#define ARGS_LIMIT_RANGE	(1ULL << 6)
#define ARGS_STRIPES_RANGE	(1ULL << 7)
#define ARGS_CONVERT		(1ULL << 8)
#define ARGS_SOFT		(1ULL << 9)
#define ARGS_USAGE_RANGE	(1ULL << 10)

/* The state of a balance (BTRFS_BALANCE_STATE_*) */
#define STATE_RUNNING		(1ULL << 0)
#define STATE_PAUSE_REQ		(1ULL << 1)
#define STATE_CANCEL_REQ	(1ULL << 2)

/* What the series' kernel filled (ext_flags, BTRFS_BALANCE_EXT_*) */
#define EXT_ESTIMATE		(1ULL << 0)
#define EXT_PROGRESS		(1ULL << 1)

/* Block group type bits (BTRFS_BLOCK_GROUP_*) */
#define BG_DATA			(1ULL << 0)
#define BG_SYSTEM		(1ULL << 1)
#define BG_METADATA		(1ULL << 2)
#define BG_PROFILES		(0x7f8ULL)

/* struct btrfs_balance_args */
struct bal_args {
	uint64_t profiles;
	union {
		uint64_t usage;
		struct {
			uint32_t usage_min;
			uint32_t usage_max;
		};
	};
	uint64_t devid;
	uint64_t pstart;
	uint64_t pend;
	uint64_t vstart;
	uint64_t vend;
	uint64_t target;
	uint64_t flags;
	union {
		uint64_t limit;
		struct {
			uint32_t limit_min;
			uint32_t limit_max;
		};
	};
	uint32_t stripes_min;
	uint32_t stripes_max;
	uint64_t unused[6];
};

/* struct btrfs_balance_progress */
struct bal_progress {
	uint64_t expected;
	uint64_t considered;
	uint64_t completed;
};

/* One type's figures, in the series' part of the args (docs/abi.md) */
struct bal_type_progress {
	uint64_t chunks_expected;
	uint64_t chunks_done;
	uint64_t bytes_expected;
	uint64_t bytes_done;
};

/* struct btrfs_ioctl_balance_args, 1024 bytes on every kernel */
struct bal_ioctl_args {
	uint64_t flags;
	uint64_t state;
	struct bal_args data, meta, sys;
	struct bal_progress stat;
	/* 0 from a kernel that does not fill what follows (upstream) */
	uint64_t ext_flags;
	struct bal_type_progress types[3];	/* data, metadata, system */
	/* with EXT_PROGRESS */
	uint64_t start_time;		/* seconds since the epoch, 0: unknown */
	uint64_t run_time_ms;		/* pauses left out */
	uint64_t current_start;		/* the chunk being relocated */
	uint64_t current_length;
	uint64_t current_type;		/* 0 between two chunks */
	uint64_t current_used;
	uint64_t unused[53];
};

_Static_assert(sizeof(struct bal_args) == 136, "btrfs_balance_args");
_Static_assert(sizeof(struct bal_ioctl_args) == 1024, "balance ioctl args");
_Static_assert(offsetof(struct bal_ioctl_args, stat) == 424, "stat");
_Static_assert(offsetof(struct bal_ioctl_args, ext_flags) == 448, "ext_flags");
_Static_assert(offsetof(struct bal_ioctl_args, types) == 456, "types");
_Static_assert(offsetof(struct bal_ioctl_args, start_time) == 552,
	       "start_time");
_Static_assert(offsetof(struct bal_ioctl_args, current_used) == 592,
	       "current_used");

#define BAL_IOCTL_MAGIC		0x94
#define IOC_BALANCE_V2		_IOWR(BAL_IOCTL_MAGIC, 32, struct bal_ioctl_args)
#define IOC_BALANCE_PROGRESS	_IOR(BAL_IOCTL_MAGIC, 34, struct bal_ioctl_args)

#endif
