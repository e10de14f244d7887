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
 * Build: gcc -static -O2 -Wall -Wextra -o bg_list bg_list.c
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#define MAX_CHUNKS	1024
#define BG_TREE		11ULL	/* BTRFS_BLOCK_GROUP_TREE_OBJECTID */

struct chunk {
	__u64 start, length, type, used;
	int have_used;
};

static struct chunk chunks[MAX_CHUNKS];
static int nchunks;

/* One tree search of [min, max] in @tree; @fn sees each item. */
static int search(int fd, __u64 tree, __u64 min_obj, __u8 min_type, __u64 min_off,
		  __u64 max_obj, __u8 max_type, __u64 max_off,
		  int (*fn)(const struct btrfs_ioctl_search_header *, const void *))
{
	struct btrfs_ioctl_search_args args;
	struct btrfs_ioctl_search_key *sk = &args.key;

	for (;;) {
		unsigned long off = 0;
		__u32 i;
		struct btrfs_ioctl_search_header sh = { 0 };

		memset(&args, 0, sizeof(args));
		sk->tree_id = tree;
		sk->min_objectid = min_obj;
		sk->min_type = min_type;
		sk->min_offset = min_off;
		sk->max_objectid = max_obj;
		sk->max_type = max_type;
		sk->max_offset = max_off;
		sk->max_transid = (__u64)-1;
		sk->nr_items = 4096;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args))
			return -1;
		if (!sk->nr_items)
			return 0;
		for (i = 0; i < sk->nr_items; i++) {
			memcpy(&sh, args.buf + off, sizeof(sh));
			off += sizeof(sh);
			if (fn(&sh, args.buf + off))
				return -1;
			off += sh.len;
		}
		/* On from the key after the last one. */
		min_obj = sh.objectid;
		min_type = sh.type;
		min_off = sh.offset + 1;
		if (min_off == 0) {
			min_type++;
			if (min_type == 0)
				return 0;
		}
	}
}

static int add_chunk(const struct btrfs_ioctl_search_header *sh, const void *item)
{
	struct btrfs_chunk ci;

	if (sh->type != BTRFS_CHUNK_ITEM_KEY || sh->len < sizeof(ci))
		return 0;
	if (nchunks >= MAX_CHUNKS) {
		errno = E2BIG;
		return -1;
	}
	memcpy(&ci, item, sizeof(ci));
	chunks[nchunks].start = sh->offset;
	chunks[nchunks].length = le64toh(ci.length);
	chunks[nchunks].type = le64toh(ci.type);
	nchunks++;
	return 0;
}

static int set_used(const struct btrfs_ioctl_search_header *sh, const void *item)
{
	struct btrfs_block_group_item bgi;
	int i;

	if (sh->type != BTRFS_BLOCK_GROUP_ITEM_KEY || sh->len < sizeof(bgi))
		return 0;
	memcpy(&bgi, item, sizeof(bgi));
	for (i = 0; i < nchunks; i++) {
		if (chunks[i].start == sh->objectid) {
			chunks[i].used = le64toh(bgi.used);
			chunks[i].have_used = 1;
		}
	}
	return 0;
}

static const char *type_name(__u64 t)
{
	switch (t & BTRFS_BLOCK_GROUP_TYPE_MASK) {
	case BTRFS_BLOCK_GROUP_DATA: return "data";
	case BTRFS_BLOCK_GROUP_METADATA: return "metadata";
	case BTRFS_BLOCK_GROUP_SYSTEM: return "system";
	case BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA: return "mixed";
	default: return "unknown";
	}
}

static const char *profile_name(__u64 t)
{
	switch (t & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case 0: return "single";
	case BTRFS_BLOCK_GROUP_DUP: return "dup";
	case BTRFS_BLOCK_GROUP_RAID0: return "raid0";
	case BTRFS_BLOCK_GROUP_RAID1: return "raid1";
	case BTRFS_BLOCK_GROUP_RAID1C3: return "raid1c3";
	case BTRFS_BLOCK_GROUP_RAID1C4: return "raid1c4";
	case BTRFS_BLOCK_GROUP_RAID10: return "raid10";
	case BTRFS_BLOCK_GROUP_RAID5: return "raid5";
	case BTRFS_BLOCK_GROUP_RAID6: return "raid6";
	default: return "unknown";
	}
}

int main(int argc, char **argv)
{
	struct btrfs_ioctl_fs_info_args fi;
	__u64 devid;
	int fd, i;

	if (argc != 2) {
		fprintf(stderr, "usage: bg_list MNT\n");
		return 1;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		fprintf(stderr, "bg_list: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (search(fd, BTRFS_CHUNK_TREE_OBJECTID,
		   BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0,
		   BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, (__u64)-1,
		   add_chunk)) {
		fprintf(stderr, "bg_list: chunk tree search: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < nchunks; i++) {
		const struct chunk *c = &chunks[i];

		/* The one key of its block group item. */
		if (search(fd, BTRFS_EXTENT_TREE_OBJECTID,
			   c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length,
			   c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length, set_used)) {
			fprintf(stderr, "bg_list: extent tree search: %s\n", strerror(errno));
			return 1;
		}
		if (!c->have_used &&
		    search(fd, BG_TREE,
			   c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length,
			   c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length, set_used) &&
		    errno != ENOENT) {
			fprintf(stderr, "bg_list: block group tree search: %s\n", strerror(errno));
			return 1;
		}
	}
	for (i = 0; i < nchunks; i++) {
		const struct chunk *c = &chunks[i];

		if (!c->have_used) {
			printf("BG start=%llu length=%llu used=? pct=? type=%s profile=%s\n",
			       (unsigned long long)c->start, (unsigned long long)c->length,
			       type_name(c->type), profile_name(c->type));
			continue;
		}
		printf("BG start=%llu length=%llu used=%llu pct=%llu type=%s profile=%s\n",
		       (unsigned long long)c->start, (unsigned long long)c->length,
		       (unsigned long long)c->used,
		       (unsigned long long)(c->length ? c->used * 100 / c->length : 0),
		       type_name(c->type), profile_name(c->type));
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
