// SPDX-License-Identifier: GPL-2.0
/*
 * resume_pause_bench: what an interrupted balance costs on the running
 * kernel, measured on fresh btrfs filesystems on the VM's virtio disks.
 * Run by bench/run.sh in the guest, once on the series and once on the
 * unpatched base kernel (the same program, the same layouts).
 *
 * 1. "resume": relocations needed to finish a balance interrupted at about
 *    half way.  Data single on 2 devices (mkfs -b, default 4G each),
 *    metadata raid1; the data chunks are made 256 MiB (sysfs chunk_size)
 *    and filled with pattern files, then files are deleted so that, from
 *    the highest chunk down, they are alternately ~95% and ~40% full.  After
 *    a remount (chunk_size back to its default), a full balance (DATA |
 *    METADATA | SYSTEM, no filters) starts; progress is polled every 20 ms
 *    and the balance paused once completed >= N/2 (N: chunks at the start).
 *    Unmount, mount (the kernel resumes the balance), wait until progress
 *    says ENOTCONN.  The relocations are the kernel's "relocating block
 *    group <start> flags <...>" lines (/dev/kmsg); the chunks are read from
 *    the chunk tree and the block group items.  Then every pattern file is
 *    read back and compared.
 * 2. "pause": pause latency inside a large block group.  One device (default
 *    /dev/vdc, >= 10 GiB so that data chunks are 1 GiB), ~2.25 GiB of
 *    pattern files.  A data balance starts; when the kernel logs the
 *    relocation of a data chunk of >= 1 GiB with at least --min-used MiB
 *    used, wait --delay ms, then BTRFS_IOC_BALANCE_CTL(PAUSE) and time its
 *    return (CLOCK_MONOTONIC).  Resume (ioctl, in a thread) and repeat,
 *    --trials in all.  When a resumed balance relocates no such chunk (the
 *    base kernel resumes with usage=90, which skips full chunks) a fresh
 *    balance is started; when a fresh balance ends without one, or ends
 *    before the pause arrives, the program says so and writes 1 GiB more
 *    before it tries again.  A trial whose block group was done before the
 *    pause was requested (another relocation started meanwhile) does not
 *    count, and is reported.
 *
 * Output: "# ..." lines for a reader, and machine-readable
 *   RESULT kernel=<label> metric=<name> value=<number>
 * lines; "BENCH DONE status=<n>" at the end.  Exit status 0 when every
 * part ran (whatever the numbers), 1 otherwise.
 *
 *   resume_pause_bench [--kernel LABEL] [--only resume|pause]
 *       [--resume-devs DEV1,DEV2] [--resume-dev-size SIZE] [--chunks N]
 *       [--pause-dev DEV] [--data-mib MIB] [--trials N] [--delay MS]
 *       [--min-used MIB] [--timeout SECS]
 *
 * Build: gcc -static -O2 -Wall -Wextra -I kselftests -o ... resume_pause_bench.c -lpthread
 */
#define _GNU_SOURCE
#include "../kselftests/btrfs_util.h"

#include <getopt.h>
#include <stdarg.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#define SZ_1G		(1024ULL * SZ_1M)
#define MAX_FILES	2048

static const char *label = "unknown";

static void result(const char *metric, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void result(const char *metric, const char *fmt, ...)
{
	va_list ap;

	printf("RESULT kernel=%s metric=%s value=", label, metric);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

#define note(...) do { printf("# " __VA_ARGS__); printf("\n"); } while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- Options ---- */

static struct {
	int do_resume, do_pause;
	char resume_devs[2][128];
	const char *resume_mnt;
	const char *resume_dev_size;
	unsigned int chunks;		/* data chunks to fill */
	const char *chunk_size;		/* data chunk size while filling */
	unsigned int file_mib;		/* pattern file size (resume) */
	unsigned int pct_full, pct_low;
	char pause_dev[128];
	const char *pause_mnt;
	unsigned int data_mib;		/* pattern data written (pause) */
	unsigned int pause_file_mib;
	unsigned int trials;
	unsigned int delay_ms;
	unsigned int min_used_mib;
	unsigned int timeout_s;
} opt = {
	.do_resume = 1, .do_pause = 1,
	.resume_devs = { "/dev/vda", "/dev/vdb" },
	.resume_mnt = "/mnt/bench-resume",
	.resume_dev_size = "4G",
	.chunks = 12,
	.chunk_size = "256M",
	.file_mib = 4,
	.pct_full = 95, .pct_low = 40,
	.pause_dev = "/dev/vdc",
	.pause_mnt = "/mnt/bench-pause",
	.data_mib = 2304,
	.pause_file_mib = 64,
	.trials = 3,
	.delay_ms = 1500,
	.min_used_mib = 960,
	.timeout_s = 3600,
};

/* ---- The kernel log, from /dev/kmsg ---- */

struct kline {
	double t;	/* now_s() when read */
	char *msg;
};

struct klog {
	int fd;
	int n, cap;
	struct kline *v;
	int lost;	/* records overwritten before they were read */
};

static int klog_open(struct klog *k)
{
	memset(k, 0, sizeof(*k));
	k->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (k->fd < 0)
		return -errno;
	if (lseek(k->fd, 0, SEEK_END) < 0)
		return -errno;
	return 0;
}

static int klog_poll(struct klog *k)
{
	char rec[8192];
	double t = now_s();

	for (;;) {
		ssize_t n = read(k->fd, rec, sizeof(rec) - 1);
		char *msg;

		if (n < 0 && errno == EPIPE) {
			k->lost++;
			continue;
		}
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		msg[strcspn(msg, "\n")] = '\0';
		if (k->n == k->cap) {
			int cap = k->cap ? 2 * k->cap : 256;
			struct kline *v = realloc(k->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			k->v = v;
			k->cap = cap;
		}
		k->v[k->n].t = t;
		k->v[k->n].msg = strdup(msg);
		if (!k->v[k->n].msg)
			return -ENOMEM;
		k->n++;
	}
}

static void klog_close(struct klog *k)
{
	int i;

	for (i = 0; i < k->n; i++)
		free(k->v[i].msg);
	free(k->v);
	if (k->fd >= 0)
		close(k->fd);
	memset(k, 0, sizeof(*k));
	k->fd = -1;
}

/* "relocating block group <start> flags <flags>": 1 and the start, else 0. */
static int reloc_line(const char *msg, __u64 *start)
{
	static const char needle[] = "relocating block group ";
	const char *p = strstr(msg, needle);

	if (!p)
		return 0;
	*start = strtoull(p + strlen(needle), NULL, 10);
	return 1;
}

/* Relocation starts logged in lines [from, to) into @starts (max @max). */
static int relocs_between(const struct klog *k, int from, int to,
			  __u64 *starts, int max)
{
	int i, n = 0;
	__u64 s;

	for (i = from; i < to; i++)
		if (reloc_line(k->v[i].msg, &s) && n < max)
			starts[n++] = s;
	return n;
}

/* The status of the last "balance: ended with status: N" at or after @from. */
static int balance_end_status(const struct klog *k, int from, int *status)
{
	static const char needle[] = "balance: ended with status: ";
	int i, found = 0;

	for (i = from; i < k->n; i++) {
		const char *p = strstr(k->v[i].msg, needle);

		if (p) {
			*status = atoi(p + strlen(needle));
			found = 1;
		}
	}
	return found;
}

/* Print the btrfs lines of [from, to) (the kernel's own account). */
static void print_btrfs_lines(const struct klog *k, int from, int to,
			      const char *prefix)
{
	int i;

	for (i = from; i < to; i++)
		if (strstr(k->v[i].msg, "BTRFS"))
			printf("# %s%s\n", prefix, k->v[i].msg);
}

/* ---- Chunks ---- */

static const char *chunk_kind(__u64 type)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%s/%s", type_name(type),
		 profile_name(chunk_profile(type)));
	return buf;
}

static double mib(__u64 b)
{
	return b / (double)SZ_1M;
}

static int find_same(const struct chunk_list *l, const struct chunk *c);

/* The chunks, highest first; with @orig, those not in it are marked "new". */
static void print_chunks(const char *title, const struct chunk_list *l,
			 const struct chunk_list *orig)
{
	int i;

	note("%s: %d chunks (logical start, type, length, used)", title, l->n);
	for (i = l->n - 1; i >= 0; i--) {
		const struct chunk *c = &l->c[i];

		note("  %12llu %-16s %7.1f MiB %7.1f MiB used (%5.1f%%)%s",
		     (unsigned long long)c->start, chunk_kind(c->type),
		     mib(c->length), mib(c->used),
		     c->length ? 100.0 * c->used / c->length : 0.0,
		     orig && find_same(orig, c) < 0 ? "  new" : "");
	}
}

/* The chunk at logical @start, without a commit (the balance may run). */
static int lookup_chunk(int fd, __u64 start, struct chunk *out)
{
	struct btrfs_ioctl_search_key sk;
	struct chunk_list *l = calloc(1, sizeof(*l));
	int ret;

	if (!l)
		return -ENOMEM;
	search_key_exact(&sk, BTRFS_CHUNK_TREE_OBJECTID,
			 BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
			 start, start);
	ret = tree_search(fd, &sk, chunk_item_cb, l);
	if (!ret && l->n != 1)
		ret = -ENOENT;
	if (!ret)
		ret = chunk_used(fd, &l->c[0]);
	if (!ret)
		*out = l->c[0];
	free(l);
	return ret;
}

/*
 * The chunk of @l that is @c itself: same logical start, length, type and
 * device extents.  A start alone does not say it: a new chunk goes at the
 * end of the highest one, so once the balance has removed the highest
 * chunks, a copy can get the start of a chunk it relocated (the base
 * kernel does that; the series allocates above its bound while a balance
 * is on).
 */
static int find_same(const struct chunk_list *l, const struct chunk *c)
{
	int i = find_chunk(l, c->start);
	__u32 s;

	if (i < 0 || l->c[i].length != c->length || l->c[i].type != c->type ||
	    l->c[i].num_stripes != c->num_stripes)
		return -1;
	for (s = 0; s < c->num_stripes; s++)
		if (l->c[i].stripes[s].devid != c->stripes[s].devid ||
		    l->c[i].stripes[s].offset != c->stripes[s].offset)
			return -1;
	return i;
}

/* ---- Filesystem helpers ---- */

static int mkfs(char *const devs[], int ndevs, const char *data,
		const char *meta, const char *size)
{
	char *argv[16] = { "mkfs.btrfs", "-f", "-q", "-K", "-d", (char *)data,
			   "-m", (char *)meta };
	int n = 8, i;

	if (size) {
		argv[n++] = "-b";
		argv[n++] = (char *)size;
	}
	for (i = 0; i < ndevs; i++)
		argv[n++] = devs[i];
	argv[n] = NULL;
	return run_cmd(argv);
}

static int open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	return fd < 0 ? -errno : fd;
}

static int sysfs_fs_path(int fd, const char *rel, char *path, size_t size)
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
		 u[10], u[11], u[12], u[13], u[14], u[15], rel);
	return 0;
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -errno;
	close(fd);
	return ret;
}

static __u64 sysfs_read_u64(const char *path)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	return strtoull(buf, NULL, 10);
}

/* The data chunk holding all of @path's extents, -1 if several or none. */
static int file_chunk(const char *path, const struct chunk_list *l)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[64];
	} b;
	int fd = open(path, O_RDONLY);
	int owner = -2;
	__u32 i;

	if (fd < 0)
		return -1;
	memset(&b, 0, sizeof(b));
	b.fm.fm_length = ~0ULL;
	b.fm.fm_flags = FIEMAP_FLAG_SYNC;
	b.fm.fm_extent_count = 64;
	if (ioctl(fd, FS_IOC_FIEMAP, &b) < 0 || b.fm.fm_mapped_extents == 64) {
		close(fd);
		return -1;
	}
	close(fd);
	for (i = 0; i < b.fm.fm_mapped_extents; i++) {
		__u64 p = b.ext[i].fe_physical, len = b.ext[i].fe_length;
		int j, c = -1;

		for (j = 0; j < l->n; j++)
			if (p >= l->c[j].start && p + len <= l->c[j].start + l->c[j].length)
				c = j;
		if (c < 0 || (owner >= 0 && owner != c))
			return -1;
		owner = c;
	}
	return owner >= 0 ? owner : -1;
}

static int verify_files(const char *dir, int nfiles, const bool *deleted,
			__u64 size, int *checked)
{
	int i, ret;

	*checked = 0;
	ret = drop_page_cache();
	if (ret)
		note("drop_caches: %s (reading what is cached)", strerror(-ret));
	for (i = 0; i < nfiles; i++) {
		__u64 bad;

		if (deleted && deleted[i])
			continue;
		ret = verify_pattern_file(dir, i, size, &bad);
		if (ret) {
			note("file %s/f%02d: %s at offset %llu", dir, i,
			     strerror(-ret), (unsigned long long)bad);
			return ret;
		}
		(*checked)++;
	}
	return 0;
}

/* ---- 1. Relocations needed to finish after an interruption ---- */

struct resume_fs {
	struct test_env env;
	int fd;
	int nfiles;
	bool deleted[MAX_FILES];
	__u64 file_size;
};

static int resume_mount(struct resume_fs *r)
{
	int ret = mount_fs(&r->env, 2, 0, NULL);

	if (ret)
		return ret;
	r->fd = open_dir(r->env.mnt);
	return r->fd < 0 ? r->fd : 0;
}

static int resume_umount(struct resume_fs *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	return umount_fs(r->env.mnt);
}

static int count_fill_chunks(const struct chunk_list *l, int *top)
{
	int i, n = 0;

	*top = -1;
	for (i = 0; i < l->n; i++) {
		if (!(l->c[i].type & BTRFS_BLOCK_GROUP_DATA) || l->c[i].length < 64 * SZ_1M)
			continue;
		n++;
		*top = i;
	}
	return n;
}

/*
 * Fill data chunks of opt.chunk_size with pattern files until there are
 * opt.chunks of them and the highest is full, then delete files so that,
 * from the highest down, they are alternately pct_full and pct_low full.
 */
static int resume_fill(struct resume_fs *r, struct chunk_list *l)
{
	char path[PATH_SIZE];
	__u64 size;
	int i, ret, top, nbig, pos;
	bool near = false;

	ret = sysfs_fs_path(r->fd, "allocation/data/chunk_size", path, sizeof(path));
	if (!ret)
		ret = sysfs_write(path, opt.chunk_size);
	if (ret) {
		note("cannot set %s to %s: %s", path, opt.chunk_size, strerror(-ret));
		return ret;
	}
	note("data chunk_size set to %llu (sysfs, until the next mount)",
	     (unsigned long long)sysfs_read_u64(path));

	r->file_size = (__u64)opt.file_mib * SZ_1M;
	for (;;) {
		if (r->nfiles == MAX_FILES) {
			note("too many files without reaching %u data chunks", opt.chunks);
			return -E2BIG;
		}
		ret = write_pattern_file(r->env.mnt, r->nfiles, r->file_size);
		if (ret) {
			note("writing file %d: %s", r->nfiles, strerror(-ret));
			return ret;
		}
		r->nfiles++;
		/* Every 8 files, and after each once the last chunk is there. */
		if (!near && r->nfiles % 8)
			continue;
		ret = read_chunks(r->fd, l);
		if (ret)
			return ret;
		nbig = count_fill_chunks(l, &top);
		near = nbig >= (int)opt.chunks;
		/* The last chunk is full: the next file would start another. */
		if (near && top >= 0 && l->c[top].used >= l->c[top].length - r->file_size)
			break;
		if (nbig > (int)opt.chunks) {
			note("chunk %d of %u started before the last one was seen full: keeping it as it is",
			     nbig, opt.chunks);
			break;
		}
	}

	/* Which chunk each file is in. */
	{
		int owner[MAX_FILES];
		__u64 used[MAX_CHUNKS];

		for (i = 0; i < l->n; i++)
			used[i] = l->c[i].used;
		for (i = 0; i < r->nfiles; i++) {
			pattern_path(path, r->env.mnt, i);
			owner[i] = file_chunk(path, l);
		}
		pos = 0;
		for (i = l->n - 1; i >= 0; i--) {
			const struct chunk *c = &l->c[i];
			unsigned int pct;
			__u64 want;
			int f;

			if (!(c->type & BTRFS_BLOCK_GROUP_DATA) || c->length < 64 * SZ_1M)
				continue;
			pct = pos++ % 2 ? opt.pct_low : opt.pct_full;
			want = c->length / 100 * pct;
			for (f = r->nfiles - 1; f >= 0; f--) {
				if (owner[f] != i || used[i] < want + r->file_size / 2)
					continue;
				pattern_path(path, r->env.mnt, f);
				if (unlink(path))
					return -errno;
				r->deleted[f] = true;
				used[i] -= r->file_size;
			}
		}
	}
	size = 0;
	for (i = 0; i < r->nfiles; i++)
		if (!r->deleted[i])
			size += r->file_size;
	note("%d pattern files of %u MiB written, %llu MiB kept", r->nfiles,
	     opt.file_mib, (unsigned long long)(size / SZ_1M));
	/* Two commits: the second one sees the extents the first freed. */
	if (syncfs(r->fd) || syncfs(r->fd))
		return -errno;
	return 0;
}

static int resume_bench(void)
{
	struct btrfs_ioctl_balance_args args, p;
	struct chunk_list *orig, *paused, *final;
	struct resume_fs *r;
	struct balance_thread bt;
	struct klog k = { .fd = -1 };
	char *devs[2];
	__u64 *before, *after;
	double t0, t_pause, t_paused, t_mount, t_mounted, t_end;
	int ret, i, n, ndata = 0, k_done, nbefore, nafter, again = 0, never = 0;
	int orig_after = 0, idx_pause, idx_mount, status = 0, have_status;
	int checked, nbig, top, j;
	double moved_after = 0, moved_before = 0, never_mib = 0;

	r = calloc(1, sizeof(*r));
	orig = calloc(1, sizeof(*orig));
	paused = calloc(1, sizeof(*paused));
	final = calloc(1, sizeof(*final));
	before = calloc(4096, sizeof(*before));
	after = calloc(4096, sizeof(*after));
	if (!r || !orig || !paused || !final || !before || !after)
		return -ENOMEM;
	r->fd = -1;
	r->env.ndevs = 2;
	for (i = 0; i < 2; i++) {
		snprintf(r->env.devs[i], sizeof(r->env.devs[i]), "%s", opt.resume_devs[i]);
		devs[i] = r->env.devs[i];
	}
	snprintf(r->env.mnt, sizeof(r->env.mnt), "%s", opt.resume_mnt);
	mkdir(r->env.mnt, 0755);

	note("resume: mkfs -d single -m raid1 -b %s on %s %s", opt.resume_dev_size,
	     devs[0], devs[1]);
	ret = mkfs(devs, 2, "single", "raid1", opt.resume_dev_size);
	if (ret)
		return ret > 0 ? -EIO : ret;
	ret = resume_mount(r);
	if (ret) {
		note("mount: %s", strerror(-ret));
		return ret;
	}
	t0 = now_s();
	ret = resume_fill(r, orig);
	if (ret)
		goto out_umount;
	note("filled in %.1f s", now_s() - t0);
	/* A fresh mount: chunk_size back to its default for the balance. */
	ret = resume_umount(r);
	if (!ret)
		ret = resume_mount(r);
	if (ret) {
		note("remount: %s", strerror(-ret));
		return ret;
	}
	ret = read_chunks(r->fd, orig);
	if (ret)
		goto out_umount;
	print_chunks("chunks at the start", orig, NULL);
	nbig = count_fill_chunks(orig, &top);
	for (i = 0; i < orig->n; i++)
		if (orig->c[i].type & BTRFS_BLOCK_GROUP_DATA)
			ndata++;

	ret = klog_open(&k);
	if (ret) {
		note("/dev/kmsg: %s", strerror(-ret));
		goto out_umount;
	}
	memset(&args, 0, sizeof(args));
	args.flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA | BTRFS_BALANCE_SYSTEM;
	t0 = now_s();
	ret = balance_thread_start(&bt, r->fd, &args);
	if (ret)
		goto out_umount;
	for (;;) {
		usleep(20 * 1000);
		ret = klog_poll(&k);
		if (ret)
			break;
		if (balance_thread_done(&bt)) {
			ret = balance_thread_join(&bt);
			note("the balance ended (%s) before it was half way: no pause",
			     ret ? strerror(-ret) : "done");
			ret = -EAGAIN;
			goto out_umount;
		}
		if (!balance_progress(r->fd, &p) &&
		    2 * p.stat.completed >= (__u64)orig->n)
			break;
		if (now_s() - t0 > opt.timeout_s) {
			ret = -ETIMEDOUT;
			break;
		}
	}
	if (ret) {
		balance_ctl(r->fd, BTRFS_BALANCE_CTL_CANCEL);
		balance_thread_join(&bt);
		goto out_umount;
	}
	note("progress: %llu of %llu expected chunks completed after %.1f s: pausing",
	     (unsigned long long)p.stat.completed,
	     (unsigned long long)p.stat.expected, now_s() - t0);
	t_pause = now_s();
	ret = balance_ctl(r->fd, BTRFS_BALANCE_CTL_PAUSE);
	t_paused = now_s();
	i = balance_thread_join(&bt);
	note("pause: %s after %.0f ms; the balance ioctl returned %s",
	     ret ? strerror(-ret) : "ok", 1000 * (t_paused - t_pause),
	     i ? strerror(-i) : "0");
	if (ret) {
		note("the balance was not paused: no resume to measure");
		goto out_umount;
	}
	klog_poll(&k);
	idx_pause = k.n;
	ret = read_chunks(r->fd, paused);
	if (ret)
		goto out_umount;
	print_chunks("chunks when paused", paused, orig);
	note("balance item on disk: %s", balance_item_present(r->fd) > 0 ? "yes" : "NO");

	ret = resume_umount(r);
	if (ret) {
		note("umount: %s", strerror(-ret));
		return ret;
	}
	klog_poll(&k);
	idx_mount = k.n;
	t_mount = now_s();
	ret = resume_mount(r);
	t_mounted = now_s();
	if (ret) {
		note("mount: %s", strerror(-ret));
		return ret;
	}
	note("mounted again in %.1f s: waiting for the resumed balance to end",
	     t_mounted - t_mount);
	for (;;) {
		ret = balance_progress(r->fd, &p);
		klog_poll(&k);
		if (ret == -ENOTCONN) {
			ret = 0;
			break;
		}
		if (ret)
			break;
		if (now_s() - t_mount > opt.timeout_s) {
			ret = -ETIMEDOUT;
			break;
		}
		usleep(20 * 1000);
	}
	t_end = now_s();
	if (ret) {
		note("waiting for the resumed balance: %s", strerror(-ret));
		goto out_umount;
	}
	usleep(100 * 1000);
	klog_poll(&k);
	have_status = balance_end_status(&k, idx_mount, &status);
	note("the resumed balance ended after %.1f s (kernel: %s%d)", t_end - t_mount,
	     have_status ? "status " : "no status line, ", status);
	print_btrfs_lines(&k, 0, k.n, "kmsg: ");
	if (k.lost)
		note("WARNING: %d kernel log records were overwritten before they were read", k.lost);

	ret = read_chunks(r->fd, final);
	if (ret)
		goto out_umount;
	print_chunks("chunks at the end", final, orig);

	nbefore = relocs_between(&k, 0, idx_pause, before, 4096);
	nafter = relocs_between(&k, idx_mount, k.n, after, 4096);
	k_done = 0;
	for (i = 0; i < orig->n; i++) {
		if (find_same(paused, &orig->c[i]) < 0) {
			k_done++;
			moved_before += mib(orig->c[i].used);
		}
		j = find_same(final, &orig->c[i]);
		if (j >= 0) {
			never++;
			never_mib += mib(final->c[j].used);
		}
	}
	/*
	 * What the resumed balance relocated: the chunks of the paused
	 * filesystem at those starts (the resumed walk does not reach the
	 * chunks it allocates itself), original chunks or copies.
	 */
	for (i = 0; i < nafter; i++) {
		j = find_chunk(paused, after[i]);

		if (j >= 0 && find_same(orig, &paused->c[j]) >= 0)
			orig_after++;
		else
			again++;
		if (j >= 0)
			moved_after += mib(paused->c[j].used);
	}
	n = orig->n;
	note("resume: N=%d chunks (%d data, %d filled), K=%d relocated before the pause "
	     "(%d started), %d relocations after the resume (%d of original chunks, "
	     "%d of copies), %d original chunks never relocated",
	     n, ndata, nbig, k_done, nbefore, nafter, orig_after, again, never);

	ret = verify_files(r->env.mnt, r->nfiles, r->deleted, r->file_size, &checked);
	note("files: %d of %llu MiB verified: %s", checked,
	     (unsigned long long)opt.file_mib, ret ? "MISMATCH" : "all match");

	result("resume_chunks_at_start", "%d", n);
	result("resume_data_chunks_at_start", "%d", ndata);
	result("resume_relocated_before_pause", "%d", k_done);
	result("resume_relocations_started_before_pause", "%d", nbefore);
	result("resume_relocations_interrupted_by_pause", "%d", nbefore - k_done);
	result("resume_relocations_after_resume", "%d", nafter);
	result("resume_originals_relocated_after_resume", "%d", orig_after);
	result("resume_copies_relocated_again", "%d", again);
	result("resume_originals_never_relocated", "%d", never);
	result("resume_mib_never_relocated", "%.0f", never_mib);
	result("resume_relocations_total", "%d", nbefore + nafter);
	result("resume_mib_moved_before_pause", "%.0f", moved_before);
	result("resume_mib_moved_after_resume", "%.0f", moved_after);
	result("resume_pause_ms", "%.0f", 1000 * (t_paused - t_pause));
	result("resume_seconds_after_mount", "%.1f", t_end - t_mount);
	result("resume_end_status", "%d", have_status ? status : 999);
	result("resume_files_verified", "%d", ret ? 0 : 1);
	result("resume_files_checked", "%d", checked);

out_umount:
	klog_close(&k);
	i = resume_umount(r);
	if (i)
		note("umount %s: %s", r->env.mnt, strerror(-i));
	free(r);
	free(orig);
	free(paused);
	free(final);
	free(before);
	free(after);
	return ret;
}

/* ---- 2. Pause latency inside a large block group ---- */

struct pause_fs {
	struct test_env env;
	char dir[PATH_MAX];
	int fd;
	int nfiles;
	__u64 file_size;
};

static int pause_write(struct pause_fs *s, __u64 mib_more)
{
	__u64 done;
	int ret;

	for (done = 0; done < mib_more; done += opt.pause_file_mib) {
		if (s->nfiles == MAX_FILES)
			return -E2BIG;
		ret = write_pattern_file(s->dir, s->nfiles, s->file_size);
		if (ret) {
			note("writing file %d: %s", s->nfiles, strerror(-ret));
			return ret;
		}
		s->nfiles++;
	}
	return syncfs(s->fd) ? -errno : 0;
}

static int count_full(const struct chunk_list *l)
{
	int i, n = 0;

	for (i = 0; i < l->n; i++)
		if ((l->c[i].type & BTRFS_BLOCK_GROUP_DATA) && l->c[i].length >= SZ_1G &&
		    l->c[i].used >= (__u64)opt.min_used_mib * SZ_1M)
			n++;
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int pause_bench(void)
{
	struct btrfs_ioctl_balance_args args;
	struct chunk_list *l;
	struct pause_fs *s;
	struct balance_thread bt;
	struct klog k = { .fd = -1 };
	double lat[16], sorted[16], since_line[16];
	double used_mib[16];
	int interrupted[16];
	char kind[16][8];
	int valid = 0, attempts = 0, invalid = 0, more_data = 0;
	bool paused = false;
	char *devs[1];
	int ret, i, checked;

	s = calloc(1, sizeof(*s));
	l = calloc(1, sizeof(*l));
	if (!s || !l)
		return -ENOMEM;
	s->fd = -1;
	s->env.ndevs = 1;
	snprintf(s->env.devs[0], sizeof(s->env.devs[0]), "%s", opt.pause_dev);
	devs[0] = s->env.devs[0];
	snprintf(s->env.mnt, sizeof(s->env.mnt), "%s", opt.pause_mnt);
	snprintf(s->dir, sizeof(s->dir), "%s/p", opt.pause_mnt);
	s->file_size = (__u64)opt.pause_file_mib * SZ_1M;
	mkdir(s->env.mnt, 0755);
	if (opt.trials > 15)
		opt.trials = 15;

	note("pause: mkfs (defaults: data single, metadata dup) on %s", devs[0]);
	ret = mkfs(devs, 1, "single", "dup", NULL);
	if (ret)
		return ret > 0 ? -EIO : ret;
	ret = mount_fs(&s->env, 1, 0, NULL);
	if (ret) {
		note("mount: %s", strerror(-ret));
		return ret;
	}
	s->fd = open_dir(s->env.mnt);
	if (s->fd < 0 || mkdir(s->dir, 0755)) {
		ret = s->fd < 0 ? s->fd : -errno;
		goto out_umount;
	}
	{
		double t0 = now_s();

		ret = pause_write(s, opt.data_mib);
		if (ret)
			goto out_umount;
		note("%d pattern files of %u MiB written in %.1f s", s->nfiles,
		     opt.pause_file_mib, now_s() - t0);
	}
	for (;;) {
		ret = read_chunks(s->fd, l);
		if (ret)
			goto out_umount;
		if (count_full(l) >= 2 || more_data >= 3)
			break;
		note("only %d data chunks of >= 1 GiB with >= %u MiB used: writing 1 GiB more",
		     count_full(l), opt.min_used_mib);
		more_data++;
		ret = pause_write(s, 1024);
		if (ret)
			goto out_umount;
	}
	print_chunks("chunks at the start", l, NULL);

	ret = klog_open(&k);
	if (ret)
		goto out_umount;
	memset(&args, 0, sizeof(args));
	args.flags = BTRFS_BALANCE_DATA;

	while (valid < (int)opt.trials && attempts < (int)opt.trials + 6) {
		const char *how = paused ? "resumed" : "fresh";
		struct chunk c, found;
		double t_line = 0, t0, t1, t_start;
		int scan = k.n, line = -1, j, other = 0, rc, bret;
		__u64 start = 0;

		attempts++;
		if (paused) {
			struct btrfs_ioctl_balance_args ra;

			memset(&ra, 0, sizeof(ra));
			ra.flags = BTRFS_BALANCE_RESUME;
			ret = balance_thread_start(&bt, s->fd, &ra);
		} else {
			ret = balance_thread_start(&bt, s->fd, &args);
		}
		if (ret)
			goto out_umount;
		t_start = now_s();
		/* Wait for the relocation of a large, full data chunk. */
		while (line < 0) {
			ret = klog_poll(&k);
			if (ret)
				goto out_cancel;
			for (; scan < k.n && line < 0; scan++) {
				if (!reloc_line(k.v[scan].msg, &start))
					continue;
				if (lookup_chunk(s->fd, start, &c))
					continue;
				if ((c.type & BTRFS_BLOCK_GROUP_DATA) && c.length >= SZ_1G &&
				    c.used >= (__u64)opt.min_used_mib * SZ_1M) {
					line = scan;
					t_line = k.v[scan].t;
					found = c;
				}
			}
			if (line >= 0 || balance_thread_done(&bt))
				break;
			if (now_s() - t_start > opt.timeout_s) {
				ret = -ETIMEDOUT;
				goto out_cancel;
			}
			usleep(10 * 1000);
		}
		if (line < 0) {
			bret = balance_thread_join(&bt);
			paused = false;
			note("attempt %d: the %s balance ended (%s) after %.1f s without relocating a data chunk of >= 1 GiB with >= %u MiB used",
			     attempts, how, bret ? strerror(-bret) : "done", now_s() - t_start,
			     opt.min_used_mib);
			if (!strcmp(how, "fresh")) {
				if (more_data >= 3) {
					ret = -ENODATA;
					goto out_umount;
				}
				note("retrying with 1 GiB more data");
				more_data++;
				ret = pause_write(s, 1024);
				if (ret)
					goto out_umount;
			} else {
				note("starting a fresh balance");
			}
			continue;
		}
		/* The relocation is under way: let it get going, then pause. */
		while (now_s() < t_line + opt.delay_ms / 1000.0) {
			klog_poll(&k);
			usleep(2000);
		}
		t0 = now_s();
		rc = balance_ctl(s->fd, BTRFS_BALANCE_CTL_PAUSE);
		t1 = now_s();
		bret = balance_thread_join(&bt);
		klog_poll(&k);
		for (j = line + 1; j < k.n; j++) {
			__u64 x;

			if (reloc_line(k.v[j].msg, &x))
				other++;
		}
		if (rc == -ENOTCONN) {
			paused = false;
			invalid++;
			note("attempt %d: the balance ended (%s) before the pause arrived: retrying with 1 GiB more data",
			     attempts, bret ? strerror(-bret) : "done");
			more_data++;
			ret = pause_write(s, 1024);
			if (ret)
				goto out_umount;
			continue;
		}
		if (rc) {
			ret = rc;
			note("pause: %s", strerror(-rc));
			goto out_cancel;
		}
		paused = true;
		if (other) {
			invalid++;
			note("attempt %d: block group %llu was done before the pause was requested (%d relocation(s) started after it): not counted",
			     attempts, (unsigned long long)start, other);
			continue;
		}
		interrupted[valid] = lookup_chunk(s->fd, start, &c) == 0;
		lat[valid] = 1000 * (t1 - t0);
		since_line[valid] = 1000 * (t1 - t_line);
		used_mib[valid] = mib(found.used);
		snprintf(kind[valid], sizeof(kind[valid]), "%s", how);
		note("trial %d (%s balance): block group %llu (%.0f MiB used); pause requested %.0f ms after its relocation started, returned after %.0f ms; block group %s",
		     valid + 1, how, (unsigned long long)start, used_mib[valid],
		     1000 * (t0 - t_line), lat[valid],
		     interrupted[valid] ? "still there (relocation interrupted)" :
					  "gone (relocation finished)");
		valid++;
	}
	goto trials_done;
out_cancel:
	balance_ctl(s->fd, BTRFS_BALANCE_CTL_CANCEL);
	balance_thread_join(&bt);
	goto out_umount;
trials_done:
	if (paused) {
		double t0 = now_s();
		int rc = balance_ctl(s->fd, BTRFS_BALANCE_CTL_CANCEL);

		note("cancel of the paused balance: %s in %.0f ms",
		     rc ? strerror(-rc) : "ok", 1000 * (now_s() - t0));
	}
	klog_poll(&k);
	print_btrfs_lines(&k, 0, k.n, "kmsg: ");
	if (k.lost)
		note("WARNING: %d kernel log records were overwritten before they were read", k.lost);
	if (valid < (int)opt.trials) {
		note("only %d valid trials of %u after %d attempts", valid, opt.trials, attempts);
		ret = -EAGAIN;
	}
	for (i = 0; i < valid; i++) {
		char name[64];

		snprintf(name, sizeof(name), "pause_latency_ms_%d", i + 1);
		result(name, "%.1f", lat[i]);
		snprintf(name, sizeof(name), "pause_since_reloc_start_ms_%d", i + 1);
		result(name, "%.0f", since_line[i]);
		snprintf(name, sizeof(name), "pause_bg_used_mib_%d", i + 1);
		result(name, "%.0f", used_mib[i]);
		snprintf(name, sizeof(name), "pause_bg_interrupted_%d", i + 1);
		result(name, "%d", interrupted[i]);
		note("trial %d: %s balance", i + 1, kind[i]);
		sorted[i] = lat[i];
	}
	if (valid) {
		qsort(sorted, valid, sizeof(sorted[0]), cmp_double);
		result("pause_latency_ms_median", "%.1f", valid % 2 ? sorted[valid / 2] :
		       (sorted[valid / 2 - 1] + sorted[valid / 2]) / 2);
	}
	result("pause_invalid_attempts", "%d", invalid);
	result("pause_data_mib_written", "%llu",
	       (unsigned long long)(s->nfiles * (__u64)opt.pause_file_mib));
	i = verify_files(s->dir, s->nfiles, NULL, s->file_size, &checked);
	note("files: %d of %u MiB verified: %s", checked, opt.pause_file_mib,
	     i ? "MISMATCH" : "all match");
	result("pause_files_verified", "%d", i ? 0 : 1);
	if (i && !ret)
		ret = i;
out_umount:
	klog_close(&k);
	if (s->fd >= 0)
		close(s->fd);
	i = umount_fs(s->env.mnt);
	if (i)
		note("umount %s: %s", s->env.mnt, strerror(-i));
	free(s);
	free(l);
	return ret;
}

/* ---- main ---- */

static void usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: resume_pause_bench [--kernel LABEL] [--only resume|pause]\n"
		"    [--resume-devs DEV1,DEV2] [--resume-dev-size SIZE] [--chunks N]\n"
		"    [--pause-dev DEV] [--data-mib MIB] [--trials N] [--delay MS]\n"
		"    [--min-used MIB] [--timeout SECS]\n");
	exit(status);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kernel", required_argument, NULL, 'k' },
		{ "only", required_argument, NULL, 'o' },
		{ "resume-devs", required_argument, NULL, 'r' },
		{ "resume-dev-size", required_argument, NULL, 'R' },
		{ "chunks", required_argument, NULL, 'c' },
		{ "pause-dev", required_argument, NULL, 'p' },
		{ "data-mib", required_argument, NULL, 'd' },
		{ "trials", required_argument, NULL, 't' },
		{ "delay", required_argument, NULL, 'D' },
		{ "min-used", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, status = 0, ret;
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'k': label = optarg; break;
		case 'o':
			opt.do_resume = !strcmp(optarg, "resume");
			opt.do_pause = !strcmp(optarg, "pause");
			if (!opt.do_resume && !opt.do_pause)
				usage(2);
			break;
		case 'r': {
			char *comma = strchr(optarg, ',');

			if (!comma)
				usage(2);
			*comma = '\0';
			snprintf(opt.resume_devs[0], sizeof(opt.resume_devs[0]), "%s", optarg);
			snprintf(opt.resume_devs[1], sizeof(opt.resume_devs[1]), "%s", comma + 1);
			break;
		}
		case 'R': opt.resume_dev_size = optarg; break;
		case 'c': opt.chunks = atoi(optarg); break;
		case 'p': snprintf(opt.pause_dev, sizeof(opt.pause_dev), "%s", optarg); break;
		case 'd': opt.data_mib = atoi(optarg); break;
		case 't': opt.trials = atoi(optarg); break;
		case 'D': opt.delay_ms = atoi(optarg); break;
		case 'm': opt.min_used_mib = atoi(optarg); break;
		case 'T': opt.timeout_s = atoi(optarg); break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	{
		char rel[256] = "";
		int fd = open("/proc/sys/kernel/osrelease", O_RDONLY);

		if (fd >= 0) {
			if (read(fd, rel, sizeof(rel) - 1) < 0)
				rel[0] = '\0';
			close(fd);
		}
		rel[strcspn(rel, "\n")] = '\0';
		note("resume_pause_bench: kernel %s (%s)", label, rel);
	}
	if (opt.do_resume) {
		t0 = now_s();
		note("=== resume: relocations to finish a balance paused half way, after a remount ===");
		ret = resume_bench();
		note("=== resume: %s in %.1f s ===", ret ? strerror(-ret) : "done", now_s() - t0);
		result("resume_wall_seconds", "%.1f", now_s() - t0);
		if (ret) {
			result("resume_error", "%d", -ret);
			status = 1;
		}
	}
	if (opt.do_pause) {
		t0 = now_s();
		note("=== pause: latency of a pause inside a 1 GiB data block group ===");
		ret = pause_bench();
		note("=== pause: %s in %.1f s ===", ret ? strerror(-ret) : "done", now_s() - t0);
		result("pause_wall_seconds", "%.1f", now_s() - t0);
		if (ret) {
			result("pause_error", "%d", -ret);
			status = 1;
		}
	}
	printf("BENCH DONE status=%d\n", status);
	return status;
}
