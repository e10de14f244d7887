// SPDX-License-Identifier: GPL-2.0
/*
 * balance-status: the progress of a btrfs balance, and a dry run.
 *
 *   balance-status [-w] [-i SECONDS] MOUNTPOINT
 *	The balance on MOUNTPOINT: its state, a progress bar of the bytes
 *	relocated, the rate and an estimate of the time left, the chunk being
 *	relocated, then per type (data, metadata, system) and in all the
 *	chunks and bytes expected and relocated, when it started and how long
 *	it ran.  -w redraws the bar every -i seconds (default 1) until the
 *	balance is no longer running (a new line each time when the output is
 *	not a terminal), then prints the table.
 *
 *	A kernel without the byte progress (ext_flags without
 *	BTRFS_BALANCE_EXT_PROGRESS) reports chunks only: the bar then counts
 *	chunks, the rate comes from the chunks relocated between two reports
 *	(-w), and the program says so.
 *
 *   balance-status -n [-f] [-d[FILTERS]] [-m[FILTERS]] [-s[FILTERS]] MOUNTPOINT
 *	A dry run (BTRFS_BALANCE_DRY_RUN): per type, the chunks a balance
 *	with these filters would relocate and the bytes used in them.
 *	Nothing is relocated.  FILTERS as for "btrfs balance start":
 *	profiles=P[|P...], usage=N or N..M, devid=N, drange=A..B,
 *	vrange=A..B, limit=N or N..M, stripes=N..M, convert=P, soft,
 *	separated by commas.  No type flag: all three, no filter.
 *
 * The ABI of the balance ioctls is written out in balance-abi.h (struct
 * layouts and numbers are facts of the kernel's uapi), so that the
 * program builds with the headers of any distribution.  The dry run is sent only to a
 * kernel that has /sys/fs/btrfs/features/balance_dry_run: one without the
 * flag may run the balance for real instead of refusing it.
 *
 * Exit status: 0, 1 on an error, 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include "balance-abi.h"

static const char *const type_names[3] = { "data", "metadata", "system" };

static const struct {
	const char *name;
	uint64_t bit;
} profiles[] = {
	{ "single", 1ULL << 48 }, { "raid0", 1ULL << 3 }, { "raid1", 1ULL << 4 },
	{ "dup", 1ULL << 5 }, { "raid10", 1ULL << 6 }, { "raid5", 1ULL << 7 },
	{ "raid6", 1ULL << 8 }, { "raid1c3", 1ULL << 9 }, { "raid1c4", 1ULL << 10 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: balance-status [-w] [-i SECONDS] MOUNTPOINT\n"
		"       balance-status -n [-f] [-d[FILTERS]] [-m[FILTERS]] [-s[FILTERS]] MOUNTPOINT\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end || *s == '-' ? -1 : 0;
}

/* "A..B", "A.." (B: @max) or "..B" (A: 0) */
static int parse_range(const char *s, uint64_t max, uint64_t *a, uint64_t *b)
{
	const char *dots = strstr(s, "..");
	char first[32];

	if (!dots)
		return -1;
	if ((size_t)(dots - s) >= sizeof(first))
		return -1;
	memcpy(first, s, dots - s);
	first[dots - s] = '\0';
	*a = 0;
	*b = max;
	if (*first && parse_u64(first, a))
		return -1;
	if (dots[2] && parse_u64(dots + 2, b))
		return -1;
	return *a > max || *b > max ? -1 : 0;
}

static int parse_profile(const char *s, uint64_t *bit)
{
	size_t i;

	for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		if (!strcmp(s, profiles[i].name)) {
			*bit = profiles[i].bit;
			return 0;
		}
	}
	return -1;
}

/* One type's filters, "usage=50,soft,convert=raid1" */
static int parse_filters(char *s, struct bal_args *a)
{
	char *f, *v = NULL, *save = NULL;
	uint64_t lo, hi;

	for (f = strtok_r(s, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		v = strchr(f, '=');
		if (v)
			*v++ = '\0';
		if (!strcmp(f, "soft") && !v) {
			a->flags |= ARGS_SOFT;
		} else if (!v) {
			fprintf(stderr, "balance-status: filter %s needs a value\n", f);
			return -1;
		} else if (!strcmp(f, "convert")) {
			if (parse_profile(v, &a->target))
				goto bad;
			a->flags |= ARGS_CONVERT;
		} else if (!strcmp(f, "profiles")) {
			char *p, *psave = NULL;
			uint64_t bit;

			for (p = strtok_r(v, "|", &psave); p;
			     p = strtok_r(NULL, "|", &psave)) {
				if (parse_profile(p, &bit))
					goto bad;
				a->profiles |= bit;
			}
			a->flags |= ARGS_PROFILES;
		} else if (!strcmp(f, "usage")) {
			if (strstr(v, "..")) {
				if (parse_range(v, 100, &lo, &hi))
					goto bad;
				a->usage_min = lo;
				a->usage_max = hi;
				a->flags |= ARGS_USAGE_RANGE;
			} else {
				if (parse_u64(v, &a->usage) || a->usage > 100)
					goto bad;
				a->flags |= ARGS_USAGE;
			}
		} else if (!strcmp(f, "limit")) {
			if (strstr(v, "..")) {
				if (parse_range(v, UINT32_MAX, &lo, &hi))
					goto bad;
				a->limit_min = lo;
				a->limit_max = hi;
				a->flags |= ARGS_LIMIT_RANGE;
			} else {
				if (parse_u64(v, &a->limit))
					goto bad;
				a->flags |= ARGS_LIMIT;
			}
		} else if (!strcmp(f, "devid")) {
			if (parse_u64(v, &a->devid))
				goto bad;
			a->flags |= ARGS_DEVID;
		} else if (!strcmp(f, "drange")) {
			if (parse_range(v, UINT64_MAX, &a->pstart, &a->pend))
				goto bad;
			a->flags |= ARGS_DRANGE;
		} else if (!strcmp(f, "vrange")) {
			if (parse_range(v, UINT64_MAX, &a->vstart, &a->vend))
				goto bad;
			a->flags |= ARGS_VRANGE;
		} else if (!strcmp(f, "stripes")) {
			if (parse_range(v, UINT32_MAX, &lo, &hi))
				goto bad;
			a->stripes_min = lo;
			a->stripes_max = hi;
			a->flags |= ARGS_STRIPES_RANGE;
		} else {
			fprintf(stderr, "balance-status: unknown filter %s\n", f);
			return -1;
		}
	}
	return 0;
bad:
	fprintf(stderr, "balance-status: bad value for %s: %s\n", f, v ? v : "");
	return -1;
}

/* "1.50 GiB" */
static const char *human(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = bytes;
	int u = 0;

	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, size, "%.2f %s", v, units[u]);
	return buf;
}

static void bar(char *buf, int width, uint64_t done, uint64_t total)
{
	int fill = total ? (int)((double)width * (done > total ? total : done) / total) : 0;
	int i;

	buf[0] = '[';
	for (i = 0; i < width; i++)
		buf[1 + i] = i < fill ? '#' : '.';
	buf[1 + width] = ']';
	buf[2 + width] = '\0';
}

#define DRY_RUN_FEATURE	"/sys/fs/btrfs/features/balance_dry_run"

static int dry_run(int fd, const char *mnt, struct bal_ioctl_args *a)
{
	uint64_t chunks = 0, bytes = 0;
	char h[32];
	int i;

	if (access(DRY_RUN_FEATURE, F_OK)) {
		fprintf(stderr,
			"balance-status: this kernel has no balance dry run (%s: %s); nothing was sent\n",
			DRY_RUN_FEATURE, strerror(errno));
		return 1;
	}
	a->flags |= BALANCE_DRY_RUN;
	if (ioctl(fd, IOC_BALANCE_V2, a) < 0) {
		if (errno == EINVAL)
			fprintf(stderr,
				"balance-status: the kernel refused the dry run (EINVAL): the filters are invalid (see dmesg); nothing was started\n");
		else
			fprintf(stderr, "balance-status: dry run on %s: %s\n",
				mnt, strerror(errno));
		return 1;
	}
	if (!(a->ext_flags & EXT_ESTIMATE)) {
		fprintf(stderr,
			"balance-status: the kernel returned no estimate (ext_flags 0x%llx)\n",
			(unsigned long long)a->ext_flags);
		return 1;
	}
	printf("Dry run on %s: nothing relocated\n", mnt);
	printf("%-10s %10s %16s\n", "type", "chunks", "bytes used");
	for (i = 0; i < 3; i++) {
		printf("%-10s %10llu %16s\n", type_names[i],
		       (unsigned long long)a->types[i].chunks_expected,
		       human(a->types[i].bytes_expected, h, sizeof(h)));
		chunks += a->types[i].chunks_expected;
		bytes += a->types[i].bytes_expected;
	}
	printf("%-10s %10llu %16s\n", "total", (unsigned long long)chunks,
	       human(bytes, h, sizeof(h)));
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *state_name(uint64_t state)
{
	if (state & STATE_CANCEL_REQ)
		return "canceling";
	if (state & STATE_PAUSE_REQ)
		return "pausing";
	if (state & STATE_RUNNING)
		return "running";
	return "paused";
}

static const char *profile_name(uint64_t type)
{
	size_t i;

	for (i = 1; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (type & profiles[i].bit)
			return profiles[i].name;
	return "single";
}

static const char *chunk_type_name(uint64_t type)
{
	if (type & BG_DATA)
		return type & BG_METADATA ? "mixed" : "data";
	return type & BG_SYSTEM ? "system" : "metadata";
}

static void totals(const struct bal_ioctl_args *a, uint64_t *expected,
		   uint64_t *done)
{
	int i;

	*expected = *done = 0;
	for (i = 0; i < 3; i++) {
		*expected += a->types[i].bytes_expected;
		*done += a->types[i].bytes_done;
	}
}

static void duration(double s, char *buf, size_t size)
{
	unsigned long long t = s + 0.5;

	if (t >= 3600)
		snprintf(buf, size, "%lluh%02llum", t / 3600, t / 60 % 60);
	else if (t >= 60)
		snprintf(buf, size, "%llum%02llus", t / 60, t % 60);
	else
		snprintf(buf, size, "%llus", t);
}

/*
 * One line, in bytes: the rate is the kernel's, the bytes relocated over
 * the time the balance ran, pauses left out; the time left follows from
 * it.  Bytes count when a chunk is done: the chunk being relocated is
 * named beside.
 */
static void report_bytes(const char *mnt, const struct bal_ioctl_args *a,
			 int live)
{
	uint64_t total, done;
	double rate = 0, pct;
	char b[48], eta[32] = "-", h1[32], h2[32], h3[32], now[96] = "";

	totals(a, &total, &done);
	if (a->run_time_ms && done)
		rate = done / (a->run_time_ms / 1000.0);
	if (rate > 0 && total > done)
		duration((total - done) / rate, eta, sizeof(eta));
	else if (total && done >= total)
		snprintf(eta, sizeof(eta), "0s");
	pct = total ? 100.0 * (done > total ? total : done) / total : 0;
	if (a->current_type)
		snprintf(now, sizeof(now), ", relocating %s %s chunk at %s (%s used)",
			 chunk_type_name(a->current_type),
			 profile_name(a->current_type),
			 human(a->current_start, h3, sizeof(h3)),
			 human(a->current_used, h1, sizeof(h1)));
	bar(b, 30, done, total);
	/* h1 and h3 are free again once now[] holds their text. */
	printf("%s%s: %s %s %5.1f%% %s of %s, %llu of %llu chunks, %s/s, %s left%s%s",
	       live ? "\r\033[K" : "", mnt, state_name(a->state), b, pct,
	       human(done, h1, sizeof(h1)), human(total, h2, sizeof(h2)),
	       (unsigned long long)a->stat.completed,
	       (unsigned long long)a->stat.expected,
	       human((uint64_t)rate, h3, sizeof(h3)), eta, now,
	       live ? "" : "\n");
	fflush(stdout);
}

/* The table per type, and when the balance started and how long it ran. */
static void report_table(const struct bal_ioctl_args *a)
{
	uint64_t total, done, chunks = 0, chunks_done = 0;
	char h1[32], h2[32], when[64] = "unknown", ran[32];
	time_t start = a->start_time;
	struct tm tm;
	int i;

	printf("%-10s %21s %25s\n", "type", "chunks done/expected",
	       "bytes done/expected");
	for (i = 0; i < 3; i++) {
		const struct bal_type_progress *t = &a->types[i];

		printf("%-10s %10llu/%-10llu %12s/%-12s\n", type_names[i],
		       (unsigned long long)t->chunks_done,
		       (unsigned long long)t->chunks_expected,
		       human(t->bytes_done, h1, sizeof(h1)),
		       human(t->bytes_expected, h2, sizeof(h2)));
		chunks += t->chunks_expected;
		chunks_done += t->chunks_done;
	}
	totals(a, &total, &done);
	printf("%-10s %10llu/%-10llu %12s/%-12s\n", "total",
	       (unsigned long long)chunks_done, (unsigned long long)chunks,
	       human(done, h1, sizeof(h1)), human(total, h2, sizeof(h2)));
	if (a->start_time && localtime_r(&start, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	duration(a->run_time_ms / 1000.0, ran, sizeof(ran));
	printf("started %s, ran %s (pauses left out)\n", when, ran);
}

/*
 * One line from a kernel that counts chunks only: the rate and the time
 * left come from the chunks relocated between the first report and this
 * one.
 */
static void report_chunks(const char *mnt, const struct bal_ioctl_args *a,
			  uint64_t first_done, double first_t, double t,
			  int live)
{
	uint64_t total = a->stat.expected, done = a->stat.completed;
	double rate = 0;
	char b[48], eta[32] = "-";

	if (t > first_t && done > first_done)
		rate = (done - first_done) / (t - first_t);
	if (rate > 0 && total > done)
		duration((total - done) / rate, eta, sizeof(eta));
	bar(b, 30, done, total);
	printf("%s%s: %s %s %llu of %llu chunks (%llu considered), %.2f chunks/s, %s left%s",
	       live ? "\r\033[K" : "", mnt, state_name(a->state), b,
	       (unsigned long long)done, (unsigned long long)total,
	       (unsigned long long)a->stat.considered, rate, eta,
	       live ? "" : "\n");
	fflush(stdout);
}

static int progress(int fd, const char *mnt, int watch, double interval)
{
	struct bal_ioctl_args a;
	uint64_t first_done = 0;
	double first_t = 0;
	int tty = isatty(STDOUT_FILENO);
	int bytes = 0, n = 0;

	for (;;) {
		memset(&a, 0, sizeof(a));
		if (ioctl(fd, IOC_BALANCE_PROGRESS, &a) < 0) {
			if (errno == ENOTCONN) {
				printf("%s%s: no balance\n", n && tty ? "\n" : "", mnt);
				return 0;
			}
			fprintf(stderr, "balance-status: progress of %s: %s\n",
				mnt, strerror(errno));
			return 1;
		}
		if (!n) {
			bytes = !!(a.ext_flags & EXT_PROGRESS);
			first_done = a.stat.completed;
			first_t = now_s();
			if (!bytes)
				printf("%s: the kernel reports chunks, not bytes: the bar counts chunks\n",
				       mnt);
		}
		/* Redrawn in place on a terminal, a line each time in a log. */
		if (bytes)
			report_bytes(mnt, &a, watch && tty);
		else
			report_chunks(mnt, &a, first_done, first_t, now_s(),
				      watch && tty);
		n++;
		if (!watch || !(a.state & STATE_RUNNING)) {
			if (watch && tty)
				printf("\n");
			if (bytes)
				report_table(&a);
			return 0;
		}
		usleep((useconds_t)(interval * 1e6));
	}
}

int main(int argc, char **argv)
{
	struct bal_ioctl_args a;
	int watch = 0, dry = 0, opt, fd, ret;
	double interval = 1;
	char *end;

	memset(&a, 0, sizeof(a));
	while ((opt = getopt(argc, argv, "hwi:nfd::m::s::")) != -1) {
		switch (opt) {
		case 'w':
			watch = 1;
			break;
		case 'i':
			interval = strtod(optarg, &end);
			if (*end || !(interval > 0 && interval <= 3600)) {
				fprintf(stderr, "balance-status: -i: seconds from 0 to 3600, not %s\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			dry = 1;
			break;
		case 'f':
			a.flags |= BALANCE_FORCE;
			break;
		case 'd':
		case 'm':
		case 's': {
			struct bal_args *t = opt == 'd' ? &a.data :
					     opt == 'm' ? &a.meta : &a.sys;

			a.flags |= opt == 'd' ? BALANCE_DATA :
				   opt == 'm' ? BALANCE_METADATA : BALANCE_SYSTEM;
			if (optarg && parse_filters(optarg, t))
				return 2;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || (!dry && (a.flags || watch < 0))) {
		usage(stderr);
		return 2;
	}
	if (dry && !(a.flags & BALANCE_TYPES))
		a.flags |= BALANCE_TYPES;
	fd = open(argv[optind], O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		fprintf(stderr, "balance-status: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	ret = dry ? dry_run(fd, argv[optind], &a) :
		    progress(fd, argv[optind], watch, interval);
	close(fd);
	return ret;
}
