// SPDX-License-Identifier: GPL-2.0
/*
 * The block groups and the devices of a mounted btrfs, read live through
 * the kernel (BTRFS_IOC_TREE_SEARCH, BTRFS_IOC_FS_INFO, BTRFS_IOC_DEV_INFO),
 * for bench/usage-full-fs-in-guest.sh: the layout before and after a
 * balance on the unpatched kernel and on the series.  btrfs-progs 6.2 has no
 * per-chunk usage, and dump-tree reads the devices, not the live trees.
 *
 *   bg_list MNT
 *
 * prints one line per block group, in logical order:
 *   BG start=<logical> length=<bytes> used=<bytes> pct=<used %> type=<data|metadata|system|...> profile=<single|dup|raid1|...>
 * and one per device:
 *   DEV devid=<n> size=<bytes> allocated=<bytes> unallocated=<bytes>
 *
 * The chunks come from the chunk tree, the used bytes from each chunk's
 * block group item (extent tree, or the block group tree when the
 * filesystem has one).  Exit status 0, or 1 with a message on stderr.
 *
 * Build: gcc -static -O2 -Wall -Wextra -I <kernel tree>/tools/testing/selftests
 *        -o bg_list bg_list.c
 * (kselftests/btrfs_util.h, which it shares, includes kselftest.h).
 */
#define _GNU_SOURCE
#include "../kselftests/btrfs_util.h"

/* More than btrfs_util.h's chunk_list holds: a full filesystem has many. */
#define MAX_BG	1024

static struct chunk chunks[MAX_BG];
static bool have_used[MAX_BG];
static int nchunks;

static int add_chunk(const struct btrfs_ioctl_search_header *sh,
		     const void *item, void *ctx)
{
	struct btrfs_chunk ci;

	(void)ctx;
	if (sh->type != BTRFS_CHUNK_ITEM_KEY || sh->len < sizeof(ci))
		return 0;
	if (nchunks >= MAX_BG)
		return -E2BIG;
	memcpy(&ci, item, sizeof(ci));
	chunks[nchunks].start = sh->offset;
	chunks[nchunks].length = le64toh(ci.length);
	chunks[nchunks].type = le64toh(ci.type);
	nchunks++;
	return 0;
}

int main(int argc, char **argv)
{
	struct btrfs_ioctl_fs_info_args fi;
	struct btrfs_ioctl_search_key sk;
	__u64 devid;
	int fd, i, ret;

	if (argc != 2) {
		fprintf(stderr, "usage: bg_list MNT\n");
		return 1;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		fprintf(stderr, "bg_list: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	search_key_exact(&sk, BTRFS_CHUNK_TREE_OBJECTID,
			 BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
			 0, (__u64)-1);
	ret = tree_search(fd, &sk, add_chunk, NULL);
	if (ret) {
		fprintf(stderr, "bg_list: chunk tree search: %s\n", strerror(-ret));
		return 1;
	}
	for (i = 0; i < nchunks; i++) {
		/* Its block group item: extent tree, or block group tree. */
		ret = chunk_used(fd, &chunks[i]);
		if (ret && ret != -ENOENT) {
			fprintf(stderr, "bg_list: block group item search: %s\n",
				strerror(-ret));
			return 1;
		}
		have_used[i] = !ret;
	}
	for (i = 0; i < nchunks; i++) {
		const struct chunk *c = &chunks[i];
		const char *type = type_name(c->type);
		const char *profile = profile_name(chunk_profile(c->type));

		if (!have_used[i]) {
			printf("BG start=%llu length=%llu used=? pct=? type=%s profile=%s\n",
			       (unsigned long long)c->start, (unsigned long long)c->length,
			       type, profile);
			continue;
		}
		printf("BG start=%llu length=%llu used=%llu pct=%llu type=%s profile=%s\n",
		       (unsigned long long)c->start, (unsigned long long)c->length,
		       (unsigned long long)c->used,
		       (unsigned long long)(c->length ? c->used * 100 / c->length : 0),
		       type, profile);
	}

	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi)) {
		fprintf(stderr, "bg_list: FS_INFO: %s\n", strerror(errno));
		return 1;
	}
	for (devid = 1; devid <= fi.max_id; devid++) {
		struct btrfs_ioctl_dev_info_args di;

		memset(&di, 0, sizeof(di));
		di.devid = devid;
		if (ioctl(fd, BTRFS_IOC_DEV_INFO, &di)) {
			if (errno == ENODEV)
				continue;
			fprintf(stderr, "bg_list: DEV_INFO %llu: %s\n",
				(unsigned long long)devid, strerror(errno));
			return 1;
		}
		printf("DEV devid=%llu size=%llu allocated=%llu unallocated=%llu\n",
		       (unsigned long long)devid, (unsigned long long)di.total_bytes,
		       (unsigned long long)di.bytes_used,
		       (unsigned long long)(di.total_bytes > di.bytes_used ?
					    di.total_bytes - di.bytes_used : 0));
	}
	close(fd);
	return 0;
}
