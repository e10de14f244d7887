/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the btrfs balance selftests: the test environment, running
 * commands, files of known content, the chunk tree as seen through
 * BTRFS_IOC_TREE_SEARCH_V2 and a balance running in a thread.
 *
 * Functions return 0 or a negative errno; ioctl wrappers return what the
 * ioctl returned, or -errno when it failed, so that the positive
 * BTRFS_ERROR_* codes some ioctls return stay visible.
 */
#ifndef BTRFS_UTIL_H
#define BTRFS_UTIL_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#include "kselftest.h"

#define MAX_DEVS	8
#define MAX_CHUNKS	128
#define MAX_STRIPES	16
#define SZ_1M		(1024ULL * 1024)
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif
#define PATH_SIZE	(PATH_MAX + 16)	/* the mount point and a file name */

/* ---- Environment: BTRFS_TEST_DEVS and BTRFS_TEST_MNT ---- */

struct test_env {
	int ndevs;
	char devs[MAX_DEVS][128];
	char mnt[PATH_MAX];
};

static inline int env_load(struct test_env *env)
{
	const char *devs = getenv("BTRFS_TEST_DEVS");
	const char *mnt = getenv("BTRFS_TEST_MNT");
	char buf[4096];
	char *tok, *save;

	memset(env, 0, sizeof(*env));
	snprintf(env->mnt, sizeof(env->mnt), "%s",
		 mnt && *mnt ? mnt : "/mnt/test");
	if (!devs)
		return 0;
	snprintf(buf, sizeof(buf), "%s", devs);
	for (tok = strtok_r(buf, " \t\n", &save); tok && env->ndevs < MAX_DEVS;
	     tok = strtok_r(NULL, " \t\n", &save))
		snprintf(env->devs[env->ndevs++], sizeof(env->devs[0]), "%s", tok);
	return env->ndevs;
}

/* ---- The kernel command line: restriper.<key>=<value> ---- */

/*
 * The value of restriper.@key= on the kernel command line, into @buf (cut
 * to @size - 1 characters, @size > 0); false, @buf untouched, when it is
 * not there.  Only a whole word matches: at the start of the line or after
 * a space, the value ending at the next space.
 */
static inline bool kernel_cmdline_get(const char *key, char *buf, size_t size)
{
	char line[4096], want[64];
	size_t klen, len;
	const char *p;
	ssize_t n;
	int fd;

	klen = snprintf(want, sizeof(want), "restriper.%s=", key);
	if (klen >= sizeof(want))
		return false;
	fd = open("/proc/cmdline", O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return false;
	line[n] = '\0';
	for (p = line; (p = strstr(p, want)); p += klen) {
		if (p != line && p[-1] != ' ')
			continue;
		p += klen;
		len = strcspn(p, "\n ");
		snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), p);
		return true;
	}
	return false;
}

/* restriper.@key=N on the kernel command line as a number; @def without it. */
static inline long kernel_cmdline_num(const char *key, long def)
{
	char buf[32];

	return kernel_cmdline_get(key, buf, sizeof(buf)) ? atol(buf) : def;
}

/* ---- Commands ---- */

static inline void dump_output(int fd, char *const argv[], int status)
{
	char buf[8192];
	ssize_t len;
	char *line, *save;
	int i;

	fprintf(stderr, "# command failed with status %d:", status);
	for (i = 0; argv[i]; i++)
		fprintf(stderr, " %s", argv[i]);
	fprintf(stderr, "\n");
	if (lseek(fd, 0, SEEK_SET) < 0)
		return;
	len = read(fd, buf, sizeof(buf) - 1);
	if (len <= 0)
		return;
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "#   %s\n", line);
}

/*
 * Run @argv (searched in PATH) with its output captured; return its exit
 * status and print the output only when the status is not 0.  With @text,
 * the start of the output is copied there too (NUL-terminated).
 */
static inline int run_cmd_text(char *const argv[], char *text, size_t size)
{
	int out = memfd_create("cmd-output", 0);
	int status, ret;
	pid_t pid;

	if (out < 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(out);
		return ret;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null >= 0)
			dup2(null, 0);
		dup2(out, 1);
		dup2(out, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid)
		ret = -ECHILD;
	else if (WIFEXITED(status))
		ret = WEXITSTATUS(status);
	else
		ret = 128 + WTERMSIG(status);
	if (ret)
		dump_output(out, argv, ret);
	if (text && size) {
		ssize_t len = pread(out, text, size - 1, 0);

		text[len > 0 ? len : 0] = '\0';
	}
	close(out);
	return ret;
}

static inline int run_cmd(char *const argv[])
{
	return run_cmd_text(argv, NULL, 0);
}

static inline int make_fs(const struct test_env *env, int ndevs, const char *data,
		   const char *meta)
{
	char *argv[9 + MAX_DEVS] = {
		"mkfs.btrfs", "-f", "-q", "-K", "-d", (char *)data,
		"-m", (char *)meta,
	};
	int i, n = 8;

	for (i = 0; i < ndevs; i++)
		argv[n++] = (char *)env->devs[i];
	argv[n] = NULL;
	return run_cmd(argv);
}

/*
 * "btrfs check --readonly" of the filesystem on the first @ndevs devices;
 * with @data_csum also --check-data-csum: every data block read and
 * checked against its checksum (one copy of each).
 */
static inline int check_fs_with(const struct test_env *env, int ndevs,
				bool data_csum)
{
	char *scan[3 + MAX_DEVS] = { "btrfs", "device", "scan" };
	char *check[6] = { "btrfs", "check", "--readonly" };
	int i, n = 3;

	if (data_csum)
		check[n++] = "--check-data-csum";
	check[n++] = (char *)env->devs[0];
	check[n] = NULL;
	for (i = 0; i < ndevs; i++)
		scan[3 + i] = (char *)env->devs[i];
	scan[3 + ndevs] = NULL;
	/* Only progs' own scanning matters for the check; best effort. */
	run_cmd(scan);
	return run_cmd(check);
}

static inline int check_fs(const struct test_env *env, int ndevs)
{
	return check_fs_with(env, ndevs, false);
}

/* scrub_fs(): the scrub corrected errors (its exit status is 0 then). */
#define SCRUB_CORRECTED	256

/*
 * "btrfs scrub start -Bd" of the filesystem mounted at @mnt: every copy of
 * every block read and checked.  Returns its exit status, which is 0
 * unless it found an error it could not correct, or SCRUB_CORRECTED when
 * a device's summary says anything but "no errors found": a copy that was
 * bad and rewritten from another one is a failure too.  (The kernel logs
 * it as a BTRFS error as well, which the log scan of the power-cut and
 * crash runs fails on.)
 */
static inline int scrub_fs(const char *mnt)
{
	char *argv[] = { "btrfs", "scrub", "start", "-Bd", (char *)mnt, NULL };
	char out[8192];
	const char *p;
	int found = 0;
	int ret;

	ret = run_cmd_text(argv, out, sizeof(out));
	if (ret)
		return ret;
	for (p = out; (p = strstr(p, "Error summary:")); p++) {
		p += strlen("Error summary:");
		p += strspn(p, " \t");
		if (strncmp(p, "no errors found", 15)) {
			fprintf(stderr, "# btrfs scrub start -Bd %s:\n%s", mnt, out);
			return SCRUB_CORRECTED;
		}
		found++;
	}
	/* -Bd prints one summary per device: none means it was not read. */
	if (!found) {
		fprintf(stderr, "# btrfs scrub start -Bd %s: no summary in:\n%s",
			mnt, out);
		return SCRUB_CORRECTED;
	}
	return 0;
}

/* Mount the first @ndevs devices, naming each with device= (no scan needed). */
static inline int mount_fs(const struct test_env *env, int ndevs, unsigned long flags,
		    const char *opts)
{
	char data[2048];
	size_t len = 0;
	int i;

	data[0] = '\0';
	for (i = 0; i < ndevs && len < sizeof(data); i++)
		len += snprintf(data + len, sizeof(data) - len, "%sdevice=%s",
				i ? "," : "", env->devs[i]);
	if (opts && *opts && len < sizeof(data))
		snprintf(data + len, sizeof(data) - len, ",%s", opts);
	if (mount(env->devs[0], env->mnt, "btrfs", flags, data))
		return -errno;
	return 0;
}

/* Remount @mnt with @flags (without MS_RDONLY: read-write) and @opts. */
static inline int remount_fs(const char *mnt, unsigned long flags,
			     const char *opts)
{
	return mount(NULL, mnt, NULL, MS_REMOUNT | flags, opts) ? -errno : 0;
}

static inline int umount_fs(const char *mnt)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (!umount2(mnt, 0))
			return 0;
		if (errno != EBUSY)
			return -errno;
		usleep(100 * 1000);
	}
	return -EBUSY;
}

static inline int drop_page_cache(void)
{
	int fd, ret = 0;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, "3\n", 2) != 2)
		ret = -errno;
	close(fd);
	return ret;
}

/* ---- Files of known content: a 64-bit word per 8 bytes, from (file, offset) ---- */

static inline __u64 pattern_word(int idx, __u64 off)
{
	__u64 x = ((__u64)idx << 48) ^ off ^ 0x9e3779b97f4a7c15ULL;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static inline void fill_pattern(__u64 *buf, size_t len, int idx, __u64 off)
{
	size_t i;

	for (i = 0; i < len / 8; i++)
		buf[i] = pattern_word(idx, off + i * 8);
}

static inline void pattern_path(char path[PATH_SIZE], const char *dir, int idx)
{
	snprintf(path, PATH_SIZE, "%s/f%02d", dir, idx);
}

/* How write_pattern() makes a file durable. */
enum pattern_sync {
	PATTERN_NOSYNC,		/* it does not: writeback will */
	PATTERN_FSYNC,		/* fsync() once it is written */
	PATTERN_DSYNC_EACH,	/* fdatasync() after each write of @step bytes */
};

/* Write the file f<@idx> of @dir with its pattern, @step bytes a write. */
static inline int write_pattern(const char *dir, int idx, __u64 size,
				size_t step, enum pattern_sync sync)
{
	char path[PATH_SIZE];
	__u64 off;
	__u64 *buf;
	int fd, ret = 0;

	pattern_path(path, dir, idx);
	buf = malloc(step);
	if (!buf)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	for (off = 0; off < size && !ret; off += step) {
		size_t len = size - off < step ? size - off : step;

		fill_pattern(buf, len, idx, off);
		if (pwrite(fd, buf, len, off) != (ssize_t)len ||
		    (sync == PATTERN_DSYNC_EACH && fdatasync(fd)))
			ret = errno ? -errno : -EIO;
	}
	if (!ret && sync == PATTERN_FSYNC && fsync(fd))
		ret = -errno;
	close(fd);
out:
	free(buf);
	return ret;
}

static inline int write_pattern_file(const char *dir, int idx, __u64 size)
{
	return write_pattern(dir, idx, size, SZ_1M, PATTERN_NOSYNC);
}

/*
 * 0 if the file f<@idx> of @dir holds its pattern, read @step bytes at a
 * time, from disk when @uncached (its clean cached pages dropped first);
 * -errno, or -EILSEQ and *@bad at the first difference.
 */
static inline int verify_pattern(const char *dir, int idx, __u64 size,
				 __u64 *bad, size_t step, bool uncached)
{
	char path[PATH_SIZE];
	__u64 *buf, *want;
	struct stat st;
	__u64 off;
	int fd, ret = 0;

	*bad = 0;
	pattern_path(path, dir, idx);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || (__u64)st.st_size != size) {
		close(fd);
		return -EFBIG;
	}
	if (uncached)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	buf = malloc(step);
	want = malloc(step);
	if (!buf || !want) {
		ret = -ENOMEM;
		goto out;
	}
	for (off = 0; off < size && !ret; off += step) {
		size_t len = size - off < step ? size - off : step;
		size_t i;

		if (pread(fd, buf, len, off) != (ssize_t)len) {
			ret = errno ? -errno : -EIO;
			break;
		}
		fill_pattern(want, len, idx, off);
		if (!memcmp(buf, want, len))
			continue;
		for (i = 0; i < len / 8 && buf[i] == want[i]; i++)
			;
		*bad = off + i * 8;
		ret = -EILSEQ;
	}
out:
	free(buf);
	free(want);
	close(fd);
	return ret;
}

/* 0 if the file holds its pattern; -EILSEQ and *@bad at the first difference. */
static inline int verify_pattern_file(const char *dir, int idx, __u64 size,
			       __u64 *bad)
{
	return verify_pattern(dir, idx, size, bad, SZ_1M, false);
}

/* ---- ioctls ---- */

static inline int xioctl(int fd, unsigned long req, void *arg)
{
	int ret = ioctl(fd, req, arg);

	return ret < 0 ? -errno : ret;
}

static inline int balance_v2(int fd, struct btrfs_ioctl_balance_args *args)
{
	return xioctl(fd, BTRFS_IOC_BALANCE_V2, args);
}

static inline int balance_ctl(int fd, int cmd)
{
	int ret = ioctl(fd, BTRFS_IOC_BALANCE_CTL, cmd);

	return ret < 0 ? -errno : ret;
}

static inline int balance_progress(int fd, struct btrfs_ioctl_balance_args *args)
{
	memset(args, 0, sizeof(*args));
	return xioctl(fd, BTRFS_IOC_BALANCE_PROGRESS, args);
}

static inline int fs_num_devices(int fd)
{
	struct btrfs_ioctl_fs_info_args fi;
	int ret;

	memset(&fi, 0, sizeof(fi));
	ret = xioctl(fd, BTRFS_IOC_FS_INFO, &fi);
	return ret ? ret : (int)fi.num_devices;
}

/* ---- Tree search ---- */

typedef int (*search_cb)(const struct btrfs_ioctl_search_header *sh,
			 const void *item, void *ctx);

/*
 * Call @cb for every item in [min key, max key] of @sk (lexicographic, so
 * items of other types in between are passed as well).  A callback result
 * other than 0 stops the walk: > 0 means done, < 0 is an error.
 */
static inline int tree_search(int fd, const struct btrfs_ioctl_search_key *sk,
		       search_cb cb, void *ctx)
{
	const size_t bufsize = 64 * 1024;
	struct btrfs_ioctl_search_args_v2 *args;
	struct btrfs_ioctl_search_key *key;
	int ret = 0;

	args = calloc(1, sizeof(*args) + bufsize);
	if (!args)
		return -ENOMEM;
	key = &args->key;
	*key = *sk;
	key->min_transid = 0;
	key->max_transid = (__u64)-1;
	while (!ret) {
		struct btrfs_ioctl_search_header sh;
		const char *p = (const char *)args->buf;
		__u32 i;

		key->nr_items = 4096;
		args->buf_size = bufsize;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args)) {
			ret = -errno;
			break;
		}
		if (!key->nr_items)
			break;
		for (i = 0; i < key->nr_items && !ret; i++) {
			memcpy(&sh, p, sizeof(sh));
			ret = cb(&sh, p + sizeof(sh), ctx);
			p += sizeof(sh) + sh.len;
		}
		/* Continue after the last key returned. */
		key->min_objectid = sh.objectid;
		key->min_type = sh.type;
		key->min_offset = sh.offset + 1;
		if (sh.offset == (__u64)-1) {
			key->min_offset = 0;
			key->min_type++;
			if (sh.type == 255) {
				key->min_type = 0;
				if (++key->min_objectid == 0)
					break;
			}
		}
		if (key->min_objectid > key->max_objectid ||
		    (key->min_objectid == key->max_objectid &&
		     (key->min_type > key->max_type ||
		      (key->min_type == key->max_type &&
		       key->min_offset > key->max_offset))))
			break;
	}
	free(args);
	return ret > 0 ? 0 : ret;
}

static inline void search_key_exact(struct btrfs_ioctl_search_key *sk, __u64 tree,
			     __u64 objectid, __u32 type,
			     __u64 min_offset, __u64 max_offset)
{
	memset(sk, 0, sizeof(*sk));
	sk->tree_id = tree;
	sk->min_objectid = objectid;
	sk->max_objectid = objectid;
	sk->min_type = type;
	sk->max_type = type;
	sk->min_offset = min_offset;
	sk->max_offset = max_offset;
}

/* ---- The chunk tree ---- */

struct chunk_stripe {
	__u64 devid;
	__u64 offset;
};

struct chunk {
	__u64 start;		/* logical */
	__u64 length;
	__u64 type;		/* BTRFS_BLOCK_GROUP_* bits, chunk format */
	__u64 used;		/* from the block group item */
	__u32 num_stripes;
	__u32 sub_stripes;
	struct chunk_stripe stripes[MAX_STRIPES];
};

/* Sorted by logical start, as the chunk tree is. */
struct chunk_list {
	int n;
	struct chunk c[MAX_CHUNKS];
};

static inline int chunk_item_cb(const struct btrfs_ioctl_search_header *sh,
			 const void *item, void *ctx)
{
	const size_t stripes_off = offsetof(struct btrfs_chunk, stripe);
	struct chunk_list *list = ctx;
	struct btrfs_chunk ci;
	struct chunk *c;
	__u32 i;

	if (sh->objectid != BTRFS_FIRST_CHUNK_TREE_OBJECTID ||
	    sh->type != BTRFS_CHUNK_ITEM_KEY)
		return 0;
	if (list->n >= MAX_CHUNKS || sh->len < sizeof(ci))
		return -E2BIG;
	memcpy(&ci, item, sizeof(ci));
	c = &list->c[list->n++];
	memset(c, 0, sizeof(*c));
	c->start = sh->offset;
	c->length = le64toh(ci.length);
	c->type = le64toh(ci.type);
	c->num_stripes = le16toh(ci.num_stripes);
	c->sub_stripes = le16toh(ci.sub_stripes);
	if (c->num_stripes == 0 || c->num_stripes > MAX_STRIPES ||
	    sh->len < stripes_off + c->num_stripes * sizeof(struct btrfs_stripe))
		return -EUCLEAN;
	for (i = 0; i < c->num_stripes; i++) {
		struct btrfs_stripe st;

		memcpy(&st, (const char *)item + stripes_off + i * sizeof(st),
		       sizeof(st));
		c->stripes[i].devid = le64toh(st.devid);
		c->stripes[i].offset = le64toh(st.offset);
	}
	return 0;
}

static inline int bg_item_cb(const struct btrfs_ioctl_search_header *sh,
		      const void *item, void *ctx)
{
	struct btrfs_block_group_item bg;

	if (sh->type != BTRFS_BLOCK_GROUP_ITEM_KEY || sh->len < sizeof(bg))
		return 0;
	memcpy(&bg, item, sizeof(bg));
	*(__u64 *)ctx = le64toh(bg.used);
	return 1;
}

/* Used bytes of a chunk's block group: extent tree, or block group tree. */
static inline int chunk_used(int fd, struct chunk *c)
{
	static const __u64 trees[] = {
		BTRFS_EXTENT_TREE_OBJECTID, BTRFS_BLOCK_GROUP_TREE_OBJECTID,
	};
	struct btrfs_ioctl_search_key sk;
	unsigned int i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(trees); i++) {
		__u64 used = (__u64)-1;

		search_key_exact(&sk, trees[i], c->start,
				 BTRFS_BLOCK_GROUP_ITEM_KEY, c->length,
				 c->length);
		ret = tree_search(fd, &sk, bg_item_cb, &used);
		if (ret && ret != -ENOENT)
			return ret;
		if (used != (__u64)-1) {
			c->used = used;
			return 0;
		}
	}
	return -ENOENT;
}

/* Commit, then read every chunk item and its block group's usage. */
static inline int read_chunks_once(int fd, struct chunk_list *list)
{
	struct btrfs_ioctl_search_key sk;
	int i, ret;

	list->n = 0;
	if (syncfs(fd))
		return -errno;
	search_key_exact(&sk, BTRFS_CHUNK_TREE_OBJECTID,
			 BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
			 0, (__u64)-1);
	ret = tree_search(fd, &sk, chunk_item_cb, list);
	for (i = 0; i < list->n && !ret; i++)
		ret = chunk_used(fd, &list->c[i]);
	return ret;
}

/*
 * The chunks, each with the bytes used in its block group.  A block group
 * gone by the time it is looked up (-ENOENT) was removed after its chunk
 * was read: the cleaner deletes emptied block groups, after a mount or
 * remount read-write too.  Read again then.
 */
static inline int read_chunks(int fd, struct chunk_list *list)
{
	int tries = 10;
	int ret;

	do {
		ret = read_chunks_once(fd, list);
	} while (ret == -ENOENT && --tries);
	return ret;
}

/* Chunks of @bg_type whose profile is @profile (0: single). */
static inline int count_chunks(const struct chunk_list *list, __u64 bg_type,
			       __u64 profile)
{
	int i, n = 0;

	for (i = 0; i < list->n; i++)
		n += (list->c[i].type & bg_type) &&
		     (list->c[i].type & BTRFS_BLOCK_GROUP_PROFILE_MASK) == profile;
	return n;
}

static inline int find_chunk(const struct chunk_list *list, __u64 start)
{
	int i;

	for (i = 0; i < list->n; i++)
		if (list->c[i].start == start)
			return i;
	return -1;
}

/* Was before->c[i] relocated, i.e. is it no longer in @after? */
static inline bool chunk_moved(const struct chunk_list *before, int i,
			const struct chunk_list *after)
{
	const struct chunk *c = &before->c[i];
	int j = find_chunk(after, c->start);

	return j < 0 || after->c[j].length != c->length ||
	       after->c[j].type != c->type;
}

/* The same chunks in both lists (none relocated, none added). */
static inline bool same_chunks(const struct chunk_list *a,
			       const struct chunk_list *b)
{
	int i;

	if (a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
		if (chunk_moved(a, i, b))
			return false;
	return true;
}

static inline int count_items_cb(const struct btrfs_ioctl_search_header *sh,
			  const void *item, void *ctx)
{
	(void)sh;
	(void)item;
	(*(int *)ctx)++;
	return 0;
}

/* 1 if the balance item (BALANCE_OBJECTID, TEMPORARY_ITEM_KEY, 0) exists. */
static inline int balance_item_present(int fd)
{
	struct btrfs_ioctl_search_key sk;
	int count = 0;
	int ret;

	search_key_exact(&sk, BTRFS_ROOT_TREE_OBJECTID, BTRFS_BALANCE_OBJECTID,
			 BTRFS_TEMPORARY_ITEM_KEY, 0, 0);
	ret = tree_search(fd, &sk, count_items_cb, &count);
	return ret ? ret : count;
}

/*
 * What the balance item says beyond its args (this series; 0 from kernels
 * that do not write them): the bound, the end of the highest chunk when the
 * balance started, at byte 416, the chunks relocated so far, at 424, and
 * the chunks below the bound when that count was written, at 432.
 */
#define BALANCE_ITEM_BOUND		416
#define BALANCE_ITEM_COMPLETED		424
#define BALANCE_ITEM_CHUNKS_BELOW	432
#define BALANCE_ITEM_SIZE		448

struct balance_item_state {
	int found;
	__u64 bound;
	__u64 completed;
	__u64 chunks_below_bound;
};

static inline int balance_item_cb(const struct btrfs_ioctl_search_header *sh,
				  const void *item, void *ctx)
{
	struct balance_item_state *st = ctx;
	const char *p = item;
	__u64 v;

	if (sh->len < BALANCE_ITEM_SIZE)
		return -EUCLEAN;
	memcpy(&v, p + BALANCE_ITEM_BOUND, sizeof(v));
	st->bound = le64toh(v);
	memcpy(&v, p + BALANCE_ITEM_COMPLETED, sizeof(v));
	st->completed = le64toh(v);
	memcpy(&v, p + BALANCE_ITEM_CHUNKS_BELOW, sizeof(v));
	st->chunks_below_bound = le64toh(v);
	st->found = 1;
	return 1;
}

/* Read the balance item's bound and count; -ENOENT if there is none. */
static inline int balance_item_read(int fd, struct balance_item_state *st)
{
	struct btrfs_ioctl_search_key sk;
	int ret;

	memset(st, 0, sizeof(*st));
	search_key_exact(&sk, BTRFS_ROOT_TREE_OBJECTID, BTRFS_BALANCE_OBJECTID,
			 BTRFS_TEMPORARY_ITEM_KEY, 0, 0);
	ret = tree_search(fd, &sk, balance_item_cb, st);
	if (ret)
		return ret;
	return st->found ? 0 : -ENOENT;
}

/* ---- Profiles ---- */

/* The profile of a chunk type in extended format (SINGLE has its own bit). */
static inline __u64 chunk_profile(__u64 type)
{
	__u64 p = type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	return p ? p : BTRFS_AVAIL_ALLOC_BIT_SINGLE;
}

static inline const char *profile_name(__u64 profile)
{
	switch (profile) {
	case BTRFS_AVAIL_ALLOC_BIT_SINGLE: return "single";
	case BTRFS_BLOCK_GROUP_DUP: return "dup";
	case BTRFS_BLOCK_GROUP_RAID0: return "raid0";
	case BTRFS_BLOCK_GROUP_RAID1: return "raid1";
	case BTRFS_BLOCK_GROUP_RAID1C3: return "raid1c3";
	case BTRFS_BLOCK_GROUP_RAID1C4: return "raid1c4";
	case BTRFS_BLOCK_GROUP_RAID10: return "raid10";
	case BTRFS_BLOCK_GROUP_RAID5: return "raid5";
	case BTRFS_BLOCK_GROUP_RAID6: return "raid6";
	}
	return "invalid";
}

static inline const char *type_name(__u64 type)
{
	if (type & BTRFS_BLOCK_GROUP_DATA)
		return (type & BTRFS_BLOCK_GROUP_METADATA) ? "mixed" : "data";
	if (type & BTRFS_BLOCK_GROUP_SYSTEM)
		return "system";
	return "metadata";
}

/* Profiles that survive the loss of a copy: converting away needs FORCE. */
static inline bool profile_is_redundant(__u64 profile)
{
	return profile & (BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 |
			  BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4 |
			  BTRFS_BLOCK_GROUP_RAID10 | BTRFS_BLOCK_GROUP_RAID5 |
			  BTRFS_BLOCK_GROUP_RAID6);
}

/* How many stripes hold distinct data, i.e. length / stripe length. */
static inline __u32 data_stripes(const struct chunk *c)
{
	__u64 p = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (p & BTRFS_BLOCK_GROUP_RAID0)
		return c->num_stripes;
	if (p & BTRFS_BLOCK_GROUP_RAID10)
		return c->num_stripes / (c->sub_stripes ? c->sub_stripes : 2);
	if (p & BTRFS_BLOCK_GROUP_RAID5)
		return c->num_stripes - 1;
	if (p & BTRFS_BLOCK_GROUP_RAID6)
		return c->num_stripes - 2;
	return 1;
}

static inline __u64 stripe_length(const struct chunk *c)
{
	return c->length / data_stripes(c);
}

/* ---- A balance in a thread ---- */

struct balance_thread {
	pthread_t tid;
	bool started;		/* joinable */
	int fd;
	struct btrfs_ioctl_balance_args args;
	int ret;		/* what BTRFS_IOC_BALANCE_V2 returned, or -errno */
	bool done;
};

static inline void *balance_thread_fn(void *arg)
{
	struct balance_thread *bt = arg;

	bt->ret = balance_v2(bt->fd, &bt->args);
	__atomic_store_n(&bt->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static inline int balance_thread_start(struct balance_thread *bt, int fd,
				const struct btrfs_ioctl_balance_args *args)
{
	int ret;

	memset(bt, 0, sizeof(*bt));
	bt->fd = fd;
	bt->args = *args;
	ret = pthread_create(&bt->tid, NULL, balance_thread_fn, bt);
	if (ret)
		return -ret;
	bt->started = true;
	return 0;
}

static inline bool balance_thread_done(struct balance_thread *bt)
{
	return __atomic_load_n(&bt->done, __ATOMIC_ACQUIRE);
}

static inline int balance_thread_join(struct balance_thread *bt)
{
	if (bt->started) {
		pthread_join(bt->tid, NULL);
		bt->started = false;
	}
	return bt->ret;
}

static inline __u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

/*
 * Poll BTRFS_IOC_BALANCE_PROGRESS until it shows RUNNING: 0.  -ESRCH when
 * the balance ended first (the thread @bt returned, or, without a thread,
 * progress says there is no balance), -ETIMEDOUT after @timeout_ms.
 */
static inline int wait_balance_running(int fd, struct balance_thread *bt,
				unsigned int timeout_ms)
{
	__u64 end = now_ms() + timeout_ms;
	struct btrfs_ioctl_balance_args p;
	int ret;

	while (now_ms() < end) {
		ret = balance_progress(fd, &p);
		if (!ret && (p.state & BTRFS_BALANCE_STATE_RUNNING))
			return 0;
		if (bt ? balance_thread_done(bt) : ret == -ENOTCONN)
			return -ESRCH;
		if (ret && ret != -ENOTCONN)
			return ret;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

/* Poll until progress says there is no balance (-ENOTCONN): 0, or -ETIMEDOUT. */
static inline int wait_balance_gone(int fd, unsigned int timeout_ms)
{
	__u64 end = now_ms() + timeout_ms;
	struct btrfs_ioctl_balance_args p;
	int ret;

	while (now_ms() < end) {
		ret = balance_progress(fd, &p);
		if (ret == -ENOTCONN)
			return 0;
		if (ret)
			return ret;
		usleep(10 * 1000);
	}
	return -ETIMEDOUT;
}

/*
 * Poll progress until the balance state has every bit of @state (e.g.
 * BTRFS_BALANCE_STATE_PAUSE_REQ): 0, or -ETIMEDOUT after @timeout_ms, or
 * what progress returned when it failed (-ENOTCONN: no balance).
 */
static inline int wait_balance_state(int fd, __u64 state, unsigned int timeout_ms)
{
	__u64 end = now_ms() + timeout_ms;
	struct btrfs_ioctl_balance_args p;
	int ret;

	while (now_ms() < end) {
		ret = balance_progress(fd, &p);
		if (ret)
			return ret;
		if ((p.state & state) == state)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

/* ---- sysfs of the filesystem ---- */

/* /sys/fs/btrfs/<fsid>/@attr of the filesystem of @fd, into @path. */
static inline int fs_sysfs_path(int fd, const char *attr, char *path,
				size_t size)
{
	struct btrfs_ioctl_fs_info_args fi;
	const __u8 *u;

	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return -errno;
	u = fi.fsid;
	snprintf(path, size,
		 "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/%s",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		 u[10], u[11], u[12], u[13], u[14], u[15], attr);
	return 0;
}

/* ---- Hold points of the balance code (CONFIG_BTRFS_DEBUG) ---- */

/*
 * /sys/fs/btrfs/<fsid>/debug/balance_hold: writing a mask of points makes
 * a balance thread of that filesystem that reaches one of them wait there
 * until the point is cleared (or the thread gets a fatal signal); reading
 * gives "<set> <held>", the points set and the points where a thread waits
 * now.  Per mount: a mount starts with none set, so that a point for the
 * resume thread is set on a read-only mount before the remount read-write
 * that starts it.  The functions below use the folder of the filesystem
 * last given to balance_hold_attach().
 */
static char balance_hold_dir[256];
#define HOLD_RELOCATION		(1UL << 0) /* before each chunk relocated */
#define HOLD_RESUME_THREAD	(1UL << 1) /* mount-time resume thread */
#define HOLD_IN_RELOCATION	(1UL << 2) /* inside a relocation, per extent */
#define HOLD_RECLAIM		(1UL << 3) /* the reclaim worker, exclop taken */

/* Use the hold points of the filesystem of @fd from now on. */
static inline int balance_hold_attach(int fd)
{
	return fs_sysfs_path(fd, "debug", balance_hold_dir,
			     sizeof(balance_hold_dir));
}

/* The file @name of the hold points' folder; -ENODEV before an attach. */
static inline int balance_hold_open(const char *name, int flags)
{
	char path[320];
	int fd;

	if (!balance_hold_dir[0])
		return -ENODEV;
	snprintf(path, sizeof(path), "%s/%s", balance_hold_dir, name);
	fd = open(path, flags);
	return fd < 0 ? -errno : fd;
}

/* Set points let a thread pass this many times before they hold it. */
static inline int balance_hold_skip_set(unsigned int skip)
{
	char buf[32];
	int fd, len, ret = 0;

	fd = balance_hold_open("balance_hold_skip", O_WRONLY);
	if (fd < 0)
		return fd;
	len = snprintf(buf, sizeof(buf), "%u\n", skip);
	if (write(fd, buf, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

static inline int balance_hold_set(unsigned long points)
{
	char buf[32];
	int fd, len, ret = 0;

	fd = balance_hold_open("balance_hold", O_WRONLY);
	if (fd < 0)
		return fd;
	len = snprintf(buf, sizeof(buf), "0x%lx\n", points);
	if (write(fd, buf, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

static inline int balance_hold_get(unsigned long *points, unsigned long *held)
{
	char buf[64];
	ssize_t n;
	int fd;

	fd = balance_hold_open("balance_hold", O_RDONLY);
	if (fd < 0)
		return fd;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n ? -errno : -EIO;
	buf[n] = '\0';
	if (sscanf(buf, "%lx %lx", points, held) != 2)
		return -EIO;
	return 0;
}

/*
 * Wait until a thread waits at hold point @point: 0, -ETIMEDOUT after
 * @timeout_ms (a timeout is a hang, not a slow machine: pass minutes).
 */
static inline int balance_hold_wait(unsigned long point, unsigned int timeout_ms)
{
	__u64 end = now_ms() + timeout_ms;
	unsigned long points, held;
	int ret;

	while (now_ms() < end) {
		ret = balance_hold_get(&points, &held);
		if (ret)
			return ret;
		if (held & point)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

/*
 * Mount the first @ndevs devices with @flags and @opts, with hold points
 * @points set before a balance on disk resumes: read-only first, the
 * points set, then a remount read-write, which starts the resume thread
 * as a read-write mount does.  The hold points used from then on are this
 * filesystem's.  0 or -errno (mounted read-only or not at all then).
 */
static inline int mount_fs_held(const struct test_env *env, int ndevs,
				unsigned long flags, const char *opts,
				unsigned long points)
{
	int fd, ret;

	ret = mount_fs(env, ndevs, flags | MS_RDONLY, opts);
	if (ret)
		return ret;
	fd = open(env->mnt, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	ret = balance_hold_attach(fd);
	close(fd);
	if (!ret)
		ret = balance_hold_set(points);
	if (!ret)
		ret = remount_fs(env->mnt, flags, opts);
	return ret;
}

/* ---- The kernel log ---- */

/*
 * What the kernel logs from kmsg_start() on, from /dev/kmsg: each record
 * "prio,seq,time,flags;message" is kept as its message, one per line.
 */
struct kmsg {
	int fd;
	char *text;
	size_t len;
};

static inline int kmsg_start(struct kmsg *k)
{
	memset(k, 0, sizeof(*k));
	k->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (k->fd < 0)
		return -errno;
	if (lseek(k->fd, 0, SEEK_END) < 0) {
		close(k->fd);
		k->fd = -1;
		return -errno;
	}
	return 0;
}

/* Read the records logged since the last call. */
static inline int kmsg_update(struct kmsg *k)
{
	char rec[8192];
	ssize_t n;

	for (;;) {
		const char *msg;
		size_t mlen;
		char *grown;

		n = read(k->fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)	/* overwritten: go on */
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		mlen = strcspn(msg, "\n");
		grown = realloc(k->text, k->len + mlen + 2);
		if (!grown)
			return -ENOMEM;
		k->text = grown;
		memcpy(k->text + k->len, msg, mlen);
		k->len += mlen;
		k->text[k->len++] = '\n';
		k->text[k->len] = '\0';
	}
}

/* 1 if a message logged since kmsg_start() contains @needle, else 0. */
static inline int kmsg_contains(struct kmsg *k, const char *needle)
{
	int ret = kmsg_update(k);

	if (ret)
		return ret;
	return k->text && strstr(k->text, needle) ? 1 : 0;
}

/*
 * The block groups relocation started on since kmsg_start(), from its
 * "relocating block group <start> flags <...>" lines, in log order, into
 * @starts (at most @max); returns how many, or -errno.
 */
static inline int kmsg_relocations(struct kmsg *k, __u64 *starts, int max)
{
	const char *needle = "relocating block group ";
	const char *p;
	int n = 0;
	int ret;

	ret = kmsg_update(k);
	if (ret)
		return ret;
	for (p = k->text; p && (p = strstr(p, needle)); p += strlen(needle)) {
		if (n == max)
			return -E2BIG;
		starts[n++] = strtoull(p + strlen(needle), NULL, 10);
	}
	return n;
}

static inline void kmsg_end(struct kmsg *k)
{
	if (k->fd >= 0)
		close(k->fd);
	free(k->text);
	memset(k, 0, sizeof(*k));
	k->fd = -1;
}

/*
 * Open /sys/fs/btrfs/<fsid>/@attr of the filesystem of @fd with @flags:
 * the file descriptor, or -errno.
 */
static inline int fs_sysfs_open(int fd, const char *attr, int flags)
{
	char path[256];
	int ret, sfd;

	ret = fs_sysfs_path(fd, attr, path, sizeof(path));
	if (ret)
		return ret;
	sfd = open(path, flags);
	return sfd < 0 ? -errno : sfd;
}

/* The whole text of /sys/fs/btrfs/<fsid>/@attr, into @buf. */
static inline int fs_sysfs_text(int fd, const char *attr, char *buf,
				size_t size)
{
	ssize_t n;
	int sfd;

	sfd = fs_sysfs_open(fd, attr, O_RDONLY);
	if (sfd < 0)
		return sfd;
	n = read(sfd, buf, size - 1);
	close(sfd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/*
 * The text of /sys/fs/btrfs/<fsid>/@attr for the filesystem of @fd, into
 * @buf, up to its first newline.
 */
static inline int fs_sysfs_read(int fd, const char *attr, char *buf,
				size_t size)
{
	int ret = fs_sysfs_text(fd, attr, buf, size);

	if (ret)
		return ret;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/*
 * The value of the line "@key value" of @text (a file of "name value"
 * lines, as balance_progress), into @val: 0, or -ENOENT.
 */
static inline int text_value(const char *text, const char *key, char *val,
			     size_t size)
{
	size_t klen = strlen(key);
	const char *line = text;

	while (*line) {
		size_t len = strcspn(line, "\n");

		if (len > klen && !strncmp(line, key, klen) &&
		    line[klen] == ' ') {
			snprintf(val, size, "%.*s", (int)(len - klen - 1),
				 line + klen + 1);
			return 0;
		}
		line += len;
		if (*line)
			line++;
	}
	return -ENOENT;
}

/* The same, as a number; U64_MAX if the line is missing or not a number. */
static inline __u64 text_u64(const char *text, const char *key)
{
	char val[32], *end;
	__u64 v;

	if (text_value(text, key, val, sizeof(val)))
		return (__u64)-1;
	v = strtoull(val, &end, 10);
	return (*val && !*end) ? v : (__u64)-1;
}

/* A number from /sys/fs/btrfs/<fsid>/@attr of the filesystem of @fd. */
static inline int read_fs_sysfs(int fd, const char *attr, __u64 *val)
{
	char buf[64];
	int ret;

	ret = fs_sysfs_read(fd, attr, buf, sizeof(buf));
	if (ret)
		return ret;
	if (!buf[0])
		return -EIO;
	*val = strtoull(buf, NULL, 0);
	return 0;
}

/*
 * The filesystem's exclusive operation as sysfs names it ("none",
 * "balance", "balance paused", "device add", ...), into @buf.
 */
static inline int exclusive_operation(int fd, char *buf, size_t size)
{
	return fs_sysfs_read(fd, "exclusive_operation", buf, size);
}

/* ---- TAP results of a program that is not a harness test ---- */

static inline int *tap_count(void)
{
	static int results;

	return &results;
}

/* Print the next result, "ok N text" or "not ok N text", and count it. */
static inline __printf(2, 3) void tap_result(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d ", ok ? "" : "not ", ++*tap_count());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (ok)
		ksft_inc_pass_cnt();
	else
		ksft_inc_fail_cnt();
}

/* The results up to @plan that a failure left without their preconditions. */
static inline void tap_skip_rest(int plan, const char *why)
{
	while (*tap_count() < plan) {
		printf("ok %d # SKIP %s\n", ++*tap_count(), why);
		ksft_inc_xskip_cnt();
	}
}

/* ---- Chunks, for messages ---- */

static inline const char *chunk_desc(const struct chunk *c, char *buf,
				     size_t size)
{
	snprintf(buf, size, "%s %s at %llu+%llu used %llu",
		 type_name(c->type), profile_name(chunk_profile(c->type)),
		 (unsigned long long)c->start, (unsigned long long)c->length,
		 (unsigned long long)c->used);
	return buf;
}

/* The end of the highest chunk of @l: a balance started now has it as bound. */
static inline __u64 chunks_end(const struct chunk_list *l)
{
	__u64 end = 0;
	int i;

	for (i = 0; i < l->n; i++)
		if (l->c[i].start + l->c[i].length > end)
			end = l->c[i].start + l->c[i].length;
	return end;
}

#endif /* BTRFS_UTIL_H */
