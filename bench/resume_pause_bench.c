// SPDX-License-Identifier: GPL-2.0
/*
 * resume_pause_bench: what an interrupted balance costs on the running
 * kernel, and how fast a balance runs, measured on fresh btrfs filesystems
 * on the VM's virtio disks.
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
 * 3. "throughput": the balance's speed against a raw copy of the same bytes
 *    on the same virtual disks.  Data single on 2 devices (default
 *    /dev/vda and /dev/vdb, mkfs -b 6G), metadata raid1, --tput-mib MiB of
 *    pattern files (default 512, files of 64 MiB).  Each of --tput-trials
 *    trials (default 5), with the page cache dropped before each step:
 *    (a) with the filesystem unmounted, the raw copies: the used part of
 *        every data chunk, read with O_DIRECT at its place on its device,
 *        written with O_DIRECT to a scratch region past the filesystem
 *        (1 GiB after its end), once to the other device ("raw1", what a
 *        balance of single data does: one read, one write per byte) and
 *        once to each device ("raw2", what a convert to raid1 does: one
 *        read, two writes), blocks of 1 MiB, one reader thread and one
 *        writer thread per target through a ring of 16 buffers, fsync
 *        inside the time;
 *    (b) mounted again: a full balance (DATA | METADATA | SYSTEM, no
 *        filters), MiB/s = data bytes used in the chunks before it / the
 *        time of the ioctl (the few MiB of metadata it relocates too are
 *        not counted: the figure errs low);
 *    (c) a convert of the data to raid1 (MiB/s of data converted), then
 *        back to single (timed too).
 *    Each figure's median over the trials, and the ratios balance/raw1 and
 *    convert/raw2.  Checked: no chunk survives a full balance, every data
 *    chunk has the profile asked for, and the files at the end.
 *
 * Output: "# ..." lines for a reader, and machine-readable
 *   RESULT kernel=<label> metric=<name> value=<number>
 * lines; "BENCH DONE status=<n>" at the end.  Exit status 0 when every
 * part ran (whatever the numbers), 1 otherwise.
 *
 *   resume_pause_bench [--kernel LABEL] [--only PART[,PART...]]
 *       [--resume-devs DEV1,DEV2] [--resume-dev-size SIZE] [--chunks N]
 *       [--pause-dev DEV] [--data-mib MIB] [--trials N] [--delay MS]
 *       [--min-used MIB] [--timeout SECS]
 *       [--tput-devs DEV1,DEV2] [--tput-dev-size SIZE] [--tput-mib MIB]
 *       [--tput-trials N]
 *   (parts: resume, pause, throughput; default all three)
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
	int do_tput;
	char tput_devs[2][128];
	const char *tput_mnt;
	const char *tput_dev_size;
	unsigned int tput_mib;		/* pattern data written (throughput) */
	unsigned int tput_file_mib;
	unsigned int tput_trials;
} opt = {
	.do_resume = 1, .do_pause = 1, .do_tput = 1,
	.tput_devs = { "/dev/vda", "/dev/vdb" },
	.tput_mnt = "/mnt/bench-tput",
	.tput_dev_size = "6G",
	.tput_mib = 512,
	.tput_file_mib = 64,
	.tput_trials = 5,
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

/*
 * Relocation starts logged in lines [from, to) into @starts (max @max);
 * with @starts NULL, how many there are.
 */
static int relocs_between(const struct klog *k, int from, int to,
			  __u64 *starts, int max)
{
	int i, n = 0;
	__u64 s;

	for (i = from; i < to; i++) {
		if (!reloc_line(k->v[i].msg, &s))
			continue;
		if (!starts)
			n++;
		else if (n < max)
			starts[n++] = s;
	}
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

/* ---- 3. Throughput: balance, convert, and a raw copy of the same bytes ---- */

/*
 * The raw copy: the bytes a balance reads (the used part of each data
 * chunk, at its place on its device) copied with O_DIRECT in blocks of
 * RAW_BLOCK to a scratch region past the filesystem, on the other device
 * (one copy, as a balance of single data writes) or on both devices (two
 * copies, as a convert to raid1 writes).  One thread reads, one thread per
 * target writes, through a ring of RAW_NBUF buffers: the reads and the
 * writes overlap, as the kernel's do.  Each target is fsynced at the end,
 * inside the time.
 */
#define RAW_BLOCK	SZ_1M
#define RAW_NBUF	16

struct raw_extent {
	int src;		/* index of the source device */
	__u64 offset;		/* physical, on it */
	__u64 length;		/* multiple of RAW_BLOCK */
};

struct raw_copy {
	int ndst;
	int src_fd[2];
	int dst_fd[2];
	__u64 dst_off;		/* scratch region on every target */
	unsigned char *buf[RAW_NBUF];
	__u64 pos[RAW_NBUF];	/* where block n % RAW_NBUF goes on the targets */
	int dst1[RAW_NBUF];	/* one copy: the target of block n % RAW_NBUF */
	__u64 nblocks, produced, consumed[2];
	int err;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

struct raw_writer {
	struct raw_copy *rc;
	int w;
};

static void *raw_writer_fn(void *arg)
{
	struct raw_writer *wr = arg;
	struct raw_copy *rc = wr->rc;
	__u64 n;

	for (n = 0; n < rc->nblocks; n++) {
		int slot = n % RAW_NBUF, err = 0;

		pthread_mutex_lock(&rc->lock);
		while (rc->produced <= n && !rc->err)
			pthread_cond_wait(&rc->cond, &rc->lock);
		err = rc->err;
		pthread_mutex_unlock(&rc->lock);
		if (err)
			break;
		if (pwrite(rc->dst_fd[rc->ndst == 1 ? rc->dst1[slot] : wr->w],
			   rc->buf[slot], RAW_BLOCK,
			   rc->dst_off + rc->pos[slot]) != (ssize_t)RAW_BLOCK)
			err = errno ? -errno : -EIO;
		pthread_mutex_lock(&rc->lock);
		if (err && !rc->err)
			rc->err = err;
		rc->consumed[wr->w] = n + 1;
		pthread_cond_broadcast(&rc->cond);
		pthread_mutex_unlock(&rc->lock);
		if (err)
			break;
	}
	/* One copy went to both devices, block by block. */
	for (n = 0; n < 2; n++) {
		int fd = rc->ndst == 1 ? rc->dst_fd[n] : rc->dst_fd[wr->w];

		if ((rc->ndst == 1 || n == 0) && fsync(fd)) {
			pthread_mutex_lock(&rc->lock);
			if (!rc->err)
				rc->err = -errno;
			pthread_mutex_unlock(&rc->lock);
		}
	}
	return NULL;
}

static __u64 raw_min_consumed(const struct raw_copy *rc)
{
	__u64 m = rc->consumed[0];
	int w;

	for (w = 1; w < rc->ndst; w++)
		if (rc->consumed[w] < m)
			m = rc->consumed[w];
	return m;
}

/* Copy @ext[0..n) to the scratch region of @ndst targets; the seconds taken. */
static int raw_copy(char devs[2][128], const struct raw_extent *ext, int n,
		    int ndst, __u64 scratch, double *seconds)
{
	struct raw_copy *rc = calloc(1, sizeof(*rc));
	struct raw_writer wr[2];
	pthread_t tid[2];
	__u64 b, done = 0;
	int i, e, ret = 0, started = 0;
	double t0;

	if (!rc)
		return -ENOMEM;
	pthread_mutex_init(&rc->lock, NULL);
	pthread_cond_init(&rc->cond, NULL);
	rc->ndst = ndst;
	rc->dst_off = scratch;
	for (i = 0; i < 2; i++)
		rc->src_fd[i] = rc->dst_fd[i] = -1;
	for (i = 0; i < 2; i++) {
		rc->src_fd[i] = open(devs[i], O_RDONLY | O_DIRECT);
		rc->dst_fd[i] = open(devs[i], O_WRONLY | O_DIRECT);
		if (rc->src_fd[i] < 0 || rc->dst_fd[i] < 0) {
			ret = -errno;
			note("raw copy: open %s: %s", devs[i], strerror(-ret));
			goto out;
		}
	}
	for (i = 0; i < RAW_NBUF; i++) {
		if (posix_memalign((void **)&rc->buf[i], 4096, RAW_BLOCK)) {
			ret = -ENOMEM;
			goto out;
		}
		memset(rc->buf[i], 0, RAW_BLOCK);
	}
	for (e = 0; e < n; e++)
		rc->nblocks += ext[e].length / RAW_BLOCK;

	t0 = now_s();
	for (i = 0; i < ndst; i++) {
		wr[i].rc = rc;
		wr[i].w = i;
		if (pthread_create(&tid[i], NULL, raw_writer_fn, &wr[i])) {
			rc->err = -EAGAIN;
			break;
		}
		started++;
	}
	b = 0;
	for (e = 0; e < n && !rc->err; e++) {
		__u64 off;

		for (off = 0; off < ext[e].length; off += RAW_BLOCK, b++) {
			int slot = b % RAW_NBUF, err = 0;

			pthread_mutex_lock(&rc->lock);
			while (b - raw_min_consumed(rc) >= RAW_NBUF && !rc->err)
				pthread_cond_wait(&rc->cond, &rc->lock);
			err = rc->err;
			pthread_mutex_unlock(&rc->lock);
			if (err)
				break;
			if (pread(rc->src_fd[ext[e].src], rc->buf[slot], RAW_BLOCK,
				  ext[e].offset + off) != (ssize_t)RAW_BLOCK)
				err = errno ? -errno : -EIO;
			pthread_mutex_lock(&rc->lock);
			if (err && !rc->err)
				rc->err = err;
			rc->pos[slot] = done;
			/* One copy: to the device the extent is not on. */
			rc->dst1[slot] = 1 - ext[e].src;
			rc->produced = b + 1;
			pthread_cond_broadcast(&rc->cond);
			pthread_mutex_unlock(&rc->lock);
			done += RAW_BLOCK;
		}
	}
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	*seconds = now_s() - t0;
	ret = rc->err;
out:
	for (i = 0; i < 2; i++) {
		if (rc->src_fd[i] >= 0)
			close(rc->src_fd[i]);
		if (rc->dst_fd[i] >= 0)
			close(rc->dst_fd[i]);
	}
	for (i = 0; i < RAW_NBUF; i++)
		free(rc->buf[i]);
	pthread_mutex_destroy(&rc->lock);
	pthread_cond_destroy(&rc->cond);
	free(rc);
	return ret;
}

static int parse_size(const char *s, __u64 *out)
{
	char *end;
	__u64 v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	case 't': case 'T': v <<= 40; end++; break;
	}
	if (end == s || *end || !v)
		return -EINVAL;
	*out = v;
	return 0;
}

static int dev_size(const char *dev, __u64 *size)
{
	int fd = open(dev, O_RDONLY);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, BLKGETSIZE64, size))
		ret = -errno;
	close(fd);
	return ret;
}

static double median_of(const double *v, int n)
{
	double s[64];
	int i;

	if (n <= 0)
		return 0;
	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++)
		s[i] = v[i];
	qsort(s, n, sizeof(s[0]), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/*
 * The used part of each data chunk (single: one stripe), rounded up to
 * RAW_BLOCK, as extents of the raw copy; *@bytes: the sum of @used.
 */
static int tput_extents(const struct chunk_list *l, struct raw_extent *ext,
			__u64 *used, __u64 *copied)
{
	int i, n = 0;

	*used = *copied = 0;
	for (i = 0; i < l->n; i++) {
		const struct chunk *c = &l->c[i];
		__u64 len;

		if (!(c->type & BTRFS_BLOCK_GROUP_DATA) || !c->used)
			continue;
		if (c->num_stripes != 1 || c->stripes[0].devid < 1 ||
		    c->stripes[0].devid > 2) {
			note("raw copy: data chunk %llu is %s on %u stripes: want single on devid 1 or 2",
			     (unsigned long long)c->start, chunk_kind(c->type),
			     c->num_stripes);
			return -EINVAL;
		}
		len = (c->used + RAW_BLOCK - 1) / RAW_BLOCK * RAW_BLOCK;
		if (len > c->length)
			len = c->length;
		ext[n].src = c->stripes[0].devid - 1;
		ext[n].offset = c->stripes[0].offset;
		ext[n].length = len;
		*used += c->used;
		*copied += len;
		n++;
	}
	return n;
}

static __u64 data_used(const struct chunk_list *l, __u64 profile_want, int *other)
{
	__u64 sum = 0;
	int i;

	*other = 0;
	for (i = 0; i < l->n; i++) {
		if (!(l->c[i].type & BTRFS_BLOCK_GROUP_DATA))
			continue;
		sum += l->c[i].used;
		if (chunk_profile(l->c[i].type) != profile_want)
			(*other)++;
	}
	return sum;
}

struct tput_fs {
	struct test_env env;
	char dir[PATH_MAX];
	int fd;
	int nfiles;
	__u64 file_size;
};

static int tput_mount(struct tput_fs *t)
{
	int ret = mount_fs(&t->env, 2, 0, NULL);

	if (ret)
		return ret;
	t->fd = open_dir(t->env.mnt);
	return t->fd < 0 ? t->fd : 0;
}

static int tput_umount(struct tput_fs *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	return umount_fs(t->env.mnt);
}

/* A balance of @args timed, with cold caches; the relocations it logged. */
static int timed_balance(struct tput_fs *t, struct klog *k,
			 struct btrfs_ioctl_balance_args *args, double *seconds,
			 int *relocs)
{
	int ret, from;
	double t0;

	ret = drop_page_cache();
	if (ret)
		return ret;
	klog_poll(k);
	from = k->n;
	t0 = now_s();
	ret = balance_v2(t->fd, args);
	*seconds = now_s() - t0;
	klog_poll(k);
	*relocs = relocs_between(k, from, k->n, NULL, 0);
	return ret;
}

static int tput_bench(void)
{
	struct btrfs_ioctl_balance_args args;
	struct raw_extent ext[MAX_CHUNKS];
	struct chunk_list *before, *after;
	struct tput_fs *t;
	struct klog k = { .fd = -1 };
	double bal[64], conv[64], back[64], raw1[64], raw2[64];
	double bal_s[64], conv_s[64];
	__u64 fs_size, size[2], scratch, used, copied, mib_files;
	int nrel_bal[64], nrel_conv[64];
	int ntr = opt.tput_trials, tr, i, ret, other, left = 0, bad_profile = 0;
	int checked, n;
	char *devs[2];

	if (ntr < 1 || ntr > 64)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	before = calloc(1, sizeof(*before));
	after = calloc(1, sizeof(*after));
	if (!t || !before || !after)
		return -ENOMEM;
	t->fd = -1;
	t->env.ndevs = 2;
	for (i = 0; i < 2; i++) {
		snprintf(t->env.devs[i], sizeof(t->env.devs[i]), "%s", opt.tput_devs[i]);
		devs[i] = t->env.devs[i];
	}
	snprintf(t->env.mnt, sizeof(t->env.mnt), "%s", opt.tput_mnt);
	snprintf(t->dir, sizeof(t->dir), "%s/t", opt.tput_mnt);
	t->file_size = (__u64)opt.tput_file_mib * SZ_1M;
	mkdir(t->env.mnt, 0755);

	ret = parse_size(opt.tput_dev_size, &fs_size);
	if (ret) {
		note("--tput-dev-size %s: not a size", opt.tput_dev_size);
		goto out_free;
	}
	/* The scratch region of the raw copy: 1 GiB past the filesystem. */
	scratch = fs_size + SZ_1G;
	for (i = 0; i < 2; i++) {
		ret = dev_size(devs[i], &size[i]);
		if (ret) {
			note("%s: %s", devs[i], strerror(-ret));
			goto out_free;
		}
		if (scratch + (__u64)opt.tput_mib * SZ_1M + SZ_1G > size[i]) {
			note("%s: %llu MiB, too small for a filesystem of %s, 1 GiB, and a scratch region of %u MiB + 1 GiB",
			     devs[i], (unsigned long long)(size[i] / SZ_1M),
			     opt.tput_dev_size, opt.tput_mib);
			ret = -ENOSPC;
			goto out_free;
		}
	}

	note("throughput: mkfs -d single -m raid1 -b %s on %s %s; raw copies to offset %llu MiB of the devices",
	     opt.tput_dev_size, devs[0], devs[1], (unsigned long long)(scratch / SZ_1M));
	ret = mkfs(devs, 2, "single", "raid1", opt.tput_dev_size);
	if (ret) {
		ret = ret > 0 ? -EIO : ret;
		goto out_free;
	}
	ret = tput_mount(t);
	if (ret || mkdir(t->dir, 0755)) {
		ret = ret ? ret : -errno;
		note("mount: %s", strerror(-ret));
		goto out_free;
	}
	{
		double t0 = now_s();

		for (mib_files = 0; mib_files < opt.tput_mib; mib_files += opt.tput_file_mib) {
			ret = write_pattern_file(t->dir, t->nfiles, t->file_size);
			if (ret) {
				note("writing file %d: %s", t->nfiles, strerror(-ret));
				goto out_umount;
			}
			t->nfiles++;
		}
		if (syncfs(t->fd)) {
			ret = -errno;
			goto out_umount;
		}
		note("%d pattern files of %u MiB written in %.1f s", t->nfiles,
		     opt.tput_file_mib, now_s() - t0);
	}
	ret = klog_open(&k);
	if (ret)
		goto out_umount;

	for (tr = 0; tr < ntr; tr++) {
		double s;

		/* The chunks as they are now: what the raw copies copy. */
		ret = read_chunks(t->fd, before);
		if (ret)
			goto out_umount;
		if (tr == 0)
			print_chunks("chunks at the start", before, NULL);
		n = tput_extents(before, ext, &used, &copied);
		if (n < 0) {
			ret = n;
			goto out_umount;
		}
		/* The raw copies, with the filesystem unmounted. */
		ret = tput_umount(t);
		if (!ret)
			ret = drop_page_cache();
		if (!ret)
			ret = raw_copy(t->env.devs, ext, n, 1, scratch, &s);
		if (ret) {
			note("raw copy (one copy): %s", strerror(-ret));
			goto out_free;
		}
		raw1[tr] = mib(copied) / s;
		ret = drop_page_cache();
		if (!ret)
			ret = raw_copy(t->env.devs, ext, n, 2, scratch, &s);
		if (ret) {
			note("raw copy (two copies): %s", strerror(-ret));
			goto out_free;
		}
		raw2[tr] = mib(copied) / s;
		ret = tput_mount(t);
		if (ret) {
			note("mount: %s", strerror(-ret));
			goto out_free;
		}

		/* A full balance. */
		memset(&args, 0, sizeof(args));
		args.flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
			     BTRFS_BALANCE_SYSTEM;
		ret = timed_balance(t, &k, &args, &bal_s[tr], &nrel_bal[tr]);
		if (ret) {
			note("full balance: %s", strerror(-ret));
			goto out_umount;
		}
		bal[tr] = mib(used) / bal_s[tr];
		ret = read_chunks(t->fd, after);
		if (ret)
			goto out_umount;
		for (i = 0; i < before->n; i++)
			if (find_same(after, &before->c[i]) >= 0)
				left++;

		/* Convert data to raid1. */
		used = data_used(after, BTRFS_AVAIL_ALLOC_BIT_SINGLE, &other);
		memset(&args, 0, sizeof(args));
		args.flags = BTRFS_BALANCE_DATA;
		args.data.flags = BTRFS_BALANCE_ARGS_CONVERT;
		args.data.target = BTRFS_BLOCK_GROUP_RAID1;
		ret = timed_balance(t, &k, &args, &conv_s[tr], &nrel_conv[tr]);
		if (ret) {
			note("convert to raid1: %s", strerror(-ret));
			goto out_umount;
		}
		conv[tr] = mib(used) / conv_s[tr];
		ret = read_chunks(t->fd, after);
		if (ret)
			goto out_umount;
		data_used(after, BTRFS_BLOCK_GROUP_RAID1, &other);
		bad_profile += other;

		/* And back to single (timed too, for the record). */
		memset(&args, 0, sizeof(args));
		args.flags = BTRFS_BALANCE_DATA;
		args.data.flags = BTRFS_BALANCE_ARGS_CONVERT;
		args.data.target = BTRFS_AVAIL_ALLOC_BIT_SINGLE;
		ret = timed_balance(t, &k, &args, &s, &i);
		if (ret) {
			note("convert back to single: %s", strerror(-ret));
			goto out_umount;
		}
		back[tr] = mib(used) / s;
		ret = read_chunks(t->fd, after);
		if (ret)
			goto out_umount;
		data_used(after, BTRFS_AVAIL_ALLOC_BIT_SINGLE, &other);
		bad_profile += other;

		note("trial %d: raw copy %.0f MiB: one copy %.1f MiB/s, two copies %.1f MiB/s; full balance of %.0f MiB of data: %.1f s, %.1f MiB/s (%d relocations); convert to raid1: %.1f s, %.1f MiB/s (%d relocations); back to single: %.1f MiB/s",
		     tr + 1, mib(copied), raw1[tr], raw2[tr], mib(used), bal_s[tr],
		     bal[tr], nrel_bal[tr], conv_s[tr], conv[tr], nrel_conv[tr], back[tr]);
	}
	if (k.lost)
		note("WARNING: %d kernel log records were overwritten before they were read", k.lost);
	if (left)
		note("WARNING: %d chunk(s) were still there after a full balance", left);
	if (bad_profile)
		note("WARNING: %d data chunk(s) did not have the profile a convert asked for", bad_profile);
	print_chunks("chunks at the end", after, NULL);

	for (tr = 0; tr < ntr; tr++) {
		char name[64];

#define TRIAL(fmt, metric, val) do {					\
		snprintf(name, sizeof(name), "%s_%d", metric, tr + 1);	\
		result(name, fmt, val);					\
	} while (0)
		TRIAL("%.1f", "tput_balance_mibps", bal[tr]);
		TRIAL("%.1f", "tput_convert_mibps", conv[tr]);
		TRIAL("%.1f", "tput_convert_back_mibps", back[tr]);
		TRIAL("%.1f", "tput_raw1_mibps", raw1[tr]);
		TRIAL("%.1f", "tput_raw2_mibps", raw2[tr]);
		TRIAL("%.2f", "tput_balance_seconds", bal_s[tr]);
		TRIAL("%.2f", "tput_convert_seconds", conv_s[tr]);
#undef TRIAL
	}
	result("tput_trials", "%d", ntr);
	result("tput_data_mib", "%.0f", mib(used));
	result("tput_raw_mib", "%.0f", mib(copied));
	result("tput_balance_mibps_median", "%.1f", median_of(bal, ntr));
	result("tput_convert_mibps_median", "%.1f", median_of(conv, ntr));
	result("tput_convert_back_mibps_median", "%.1f", median_of(back, ntr));
	result("tput_raw1_mibps_median", "%.1f", median_of(raw1, ntr));
	result("tput_raw2_mibps_median", "%.1f", median_of(raw2, ntr));
	result("tput_balance_of_raw1", "%.3f", median_of(bal, ntr) / median_of(raw1, ntr));
	result("tput_convert_of_raw2", "%.3f", median_of(conv, ntr) / median_of(raw2, ntr));
	result("tput_balance_relocations", "%d", nrel_bal[0]);
	result("tput_convert_relocations", "%d", nrel_conv[0]);
	result("tput_chunks_left_by_balance", "%d", left);
	result("tput_chunks_wrong_profile", "%d", bad_profile);

	ret = verify_files(t->dir, t->nfiles, NULL, t->file_size, &checked);
	note("files: %d of %u MiB verified: %s", checked, opt.tput_file_mib,
	     ret ? "MISMATCH" : "all match");
	result("tput_files_verified", "%d", ret ? 0 : 1);
	if (!ret && (left || bad_profile))
		ret = -EUCLEAN;
out_umount:
	if (t->fd >= 0) {
		i = tput_umount(t);
		if (i)
			note("umount %s: %s", t->env.mnt, strerror(-i));
	}
out_free:
	klog_close(&k);
	free(t);
	free(before);
	free(after);
	return ret;
}

/* ---- main ---- */

static void usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: resume_pause_bench [--kernel LABEL] [--only PART[,PART...]]\n"
		"    (parts: resume, pause, throughput; default all three)\n"
		"    [--resume-devs DEV1,DEV2] [--resume-dev-size SIZE] [--chunks N]\n"
		"    [--pause-dev DEV] [--data-mib MIB] [--trials N] [--delay MS]\n"
		"    [--min-used MIB] [--timeout SECS]\n"
		"    [--tput-devs DEV1,DEV2] [--tput-dev-size SIZE] [--tput-mib MIB]\n"
		"    [--tput-trials N]\n");
	exit(status);
}

/* "A,B" into two device names. */
static void two_devs(char *arg, char devs[2][128])
{
	char *comma = strchr(arg, ',');

	if (!comma)
		usage(2);
	*comma = '\0';
	snprintf(devs[0], sizeof(devs[0]), "%s", arg);
	snprintf(devs[1], sizeof(devs[1]), "%s", comma + 1);
}

/* --only: a comma-separated list of parts. */
static void only_parts(char *arg)
{
	char *tok, *save;

	opt.do_resume = opt.do_pause = opt.do_tput = 0;
	for (tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "resume"))
			opt.do_resume = 1;
		else if (!strcmp(tok, "pause"))
			opt.do_pause = 1;
		else if (!strcmp(tok, "throughput"))
			opt.do_tput = 1;
		else
			usage(2);
	}
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
		{ "tput-devs", required_argument, NULL, 'X' },
		{ "tput-dev-size", required_argument, NULL, 'S' },
		{ "tput-mib", required_argument, NULL, 'M' },
		{ "tput-trials", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, status = 0, ret;
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'k': label = optarg; break;
		case 'o': only_parts(optarg); break;
		case 'r': two_devs(optarg, opt.resume_devs); break;
		case 'R': opt.resume_dev_size = optarg; break;
		case 'c': opt.chunks = atoi(optarg); break;
		case 'p': snprintf(opt.pause_dev, sizeof(opt.pause_dev), "%s", optarg); break;
		case 'd': opt.data_mib = atoi(optarg); break;
		case 't': opt.trials = atoi(optarg); break;
		case 'D': opt.delay_ms = atoi(optarg); break;
		case 'm': opt.min_used_mib = atoi(optarg); break;
		case 'T': opt.timeout_s = atoi(optarg); break;
		case 'X': two_devs(optarg, opt.tput_devs); break;
		case 'S': opt.tput_dev_size = optarg; break;
		case 'M': opt.tput_mib = atoi(optarg); break;
		case 'N': opt.tput_trials = atoi(optarg); break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (!opt.tput_mib || opt.tput_mib % opt.tput_file_mib ||
	    opt.tput_trials < 1 || opt.tput_trials > 64) {
		fprintf(stderr, "--tput-mib: a multiple of %u; --tput-trials: 1 to 64\n",
			opt.tput_file_mib);
		usage(2);
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
	if (opt.do_tput) {
		t0 = now_s();
		note("=== throughput: full balance, convert to raid1, raw copy of the same bytes ===");
		ret = tput_bench();
		note("=== throughput: %s in %.1f s ===", ret ? strerror(-ret) : "done", now_s() - t0);
		result("tput_wall_seconds", "%.1f", now_s() - t0);
		if (ret) {
			result("tput_error", "%d", -ret);
			status = 1;
		}
	}
	printf("BENCH DONE status=%d\n", status);
	return status;
}
