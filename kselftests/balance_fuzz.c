// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile input for the balance ioctls: a seeded fuzzer that sends random
 * and boundary-valued requests to BTRFS_IOC_BALANCE_V2 (every field of
 * struct btrfs_ioctl_balance_args, every flag bit, known or not), mixed
 * with pause, cancel and other BTRFS_IOC_BALANCE_CTL commands,
 * BTRFS_IOC_BALANCE_PROGRESS, resumes, the legacy BTRFS_IOC_BALANCE and
 * variants of the ioctl numbers, with argument pointers that are good,
 * misaligned, read-only, NULL, unmapped, PROT_NONE, partly mapped (the
 * struct runs into a PROT_NONE page), kernel or non-canonical addresses.
 * Some requests are valid and small, so that real balances (converts too)
 * run, in a second thread as well, where the pauses, cancels and progress
 * calls of the main thread meet them; a few calls come from a thread
 * without CAP_SYS_ADMIN, and a few while the filesystem is remounted
 * read-only.
 *
 * Every call's result is checked against the set of results the kernel
 * code can give for that call in that situation (docs/reliability.md,
 * "Hostile input (fuzzer)", lists them and why): a result outside the set
 * counts as a failed call and is printed with its arguments (the first
 * MAX_SHOWN of them).  A request the fuzzer knows to be invalid (from the
 * request alone) must be refused; one it knows to be valid must not be
 * refused with -EINVAL unless a pause or cancel ran meanwhile.
 *
 * Valid dry runs are sent on purpose (every filter, with and without a
 * convert, with no balance, beside a running one and beside a paused
 * one): 0 is their only result (-EROFS on a read-only mount).  Where
 * nothing else can move a chunk meanwhile, the chunk tree must be the same
 * after the dry run as before; with no balance, the same request then run
 * for real, when it relocates at most 3 chunks, must relocate per type
 * exactly the chunks the estimate said.
 *
 * The kernel log is read after every call (a run that cannot read it
 * fails): a report (WARNING, BUG, Oops, KASAN,
 * UBSAN, lockdep, hung task, transaction abort) fails the run and is
 * printed with the calls before it.
 *
 * Then any balance left is canceled and waited for, a full balance must
 * run to its end (or run out of space: ENOSPC), the filesystem is unmounted, "btrfs check --readonly"
 * must pass, and after a mount the files written at the start must hold
 * their content.  A long run does this on a new filesystem every 1000
 * calls (so that 10,000 calls are not 10,000 calls on a filesystem full
 * of empty chunks), and after a kernel report: the remaining calls go to
 * a new filesystem, so that one report does not hide the next.
 *
 * Parameters (the first found wins):
 *   seed:  -s SEED, $RESTRIPER_FUZZ_SEED, restriper.fuzz_seed= on the
 *          kernel command line, else from the clock; always printed as
 *          "# fuzz seed S".  The seed fixes the sequence of calls and
 *          their arguments; how they interleave with the balance running
 *          in the second thread depends on timing.
 *   calls: -n CALLS, $RESTRIPER_FUZZ_CALLS, restriper.fuzz_calls=,
 *          default 1000.
 *   calls per filesystem: -e CALLS, $RESTRIPER_FUZZ_EPOCH,
 *          restriper.fuzz_epoch=, default 1000; 0: one filesystem for all.
 *
 * Output: TAP, and as the last line "# fuzz: N calls, M failed" (N calls
 * made, M of them with a result outside their set).
 *
 * Environment: BTRFS_TEST_DEVS (at least 3 block devices; the first 3 are
 * reformatted), BTRFS_TEST_MNT (default /mnt/test).  mkfs.btrfs and btrfs
 * in PATH, root.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <getopt.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#include "btrfs_util.h"
#include "kselftest.h"

#define NDEVS		3
#define DEV_SIZE	"256M"	/* 768 MiB in all: chunks of about 76 MiB */
#define MOUNT_OPTS	"nodiscard"
#define NFILES		4
#define DEFAULT_CALLS	1000
#define DEFAULT_EPOCH	1000	/* calls per filesystem */
#define MAX_SHOWN	20	/* failed calls printed */
#define MAX_KMSG_SHOWN	60	/* kernel log lines of reports printed */
#define HISTORY		8	/* calls printed before a kernel report */
#define UNPRIV_BATCH	5
/* Waits that end on an event: only a hang reaches these. */
#define HANG_MS		(600 * 1000)

#define ALL_TYPES	(BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA | \
			 BTRFS_BALANCE_SYSTEM)
#define KNOWN_FLAGS	(ALL_TYPES | BTRFS_BALANCE_FORCE | BTRFS_BALANCE_RESUME | \
			 BTRFS_BALANCE_DRY_RUN)
#define KNOWN_ARGS_FLAGS (BTRFS_BALANCE_ARGS_MASK | \
			  BTRFS_BALANCE_ARGS_CONVERT | BTRFS_BALANCE_ARGS_SOFT)
#define LIMITS		(BTRFS_BALANCE_ARGS_LIMIT | \
			 BTRFS_BALANCE_ARGS_LIMIT_RANGE)
#define EXCL_BUSY	BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS
#define STATE_BITS	(BTRFS_BALANCE_STATE_RUNNING | \
			 BTRFS_BALANCE_STATE_PAUSE_REQ | \
			 BTRFS_BALANCE_STATE_CANCEL_REQ)
/* The profiles with copies or parity (a convert away from them needs FORCE). */
#define REDUNDANT	(BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 | \
			 BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4 | \
			 BTRFS_BLOCK_GROUP_RAID10 | BTRFS_BLOCK_GROUP_RAID5 | \
			 BTRFS_BLOCK_GROUP_RAID6)
/*
 * Convert targets the kernel accepts on 3 devices (possible_profiles(3)):
 * every profile but RAID1C4 (4 devices), with SINGLE as its own bit.
 */
#define TARGETS_3DEVS	(BTRFS_AVAIL_ALLOC_BIT_SINGLE | \
			 BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID1 | \
			 BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID10 | \
			 BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6 | \
			 BTRFS_BLOCK_GROUP_RAID1C3)

static const __u64 file_sizes[NFILES] = {
	SZ_1M, 192 * 1024, 8 * 1024, 1000,	/* the last one is inline */
};

/* ---- Random numbers: splitmix64, one stream per run ---- */

static __u64 rng_state;

static __u64 rnd(void)
{
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static __u64 rnd_below(__u64 n)
{
	return n ? rnd() % n : 0;
}

static bool chance(unsigned int percent)
{
	return rnd_below(100) < percent;
}

#define PICK(table)	((table)[rnd_below(ARRAY_SIZE(table))])

static const __u64 u64_edges[] = {
	0, 1, 2, 3, 4, 99, 100, 101, 255, 256, 4095, 4096,
	0x7fffffffULL, 0x80000000ULL, 0xffffffffULL, 0x100000000ULL,
	0x100000001ULL, 0x7fffffffffffffffULL, 0x8000000000000000ULL,
	~0ULL - 1, ~0ULL,
};

static const __u32 u32_edges[] = {
	0, 1, 2, 3, 4, 99, 100, 101, 255, 0x7fffffff, 0x80000000,
	0xfffffffe, 0xffffffff,
};

static const __u64 profile_bits[] = {
	BTRFS_AVAIL_ALLOC_BIT_SINGLE, BTRFS_BLOCK_GROUP_RAID0,
	BTRFS_BLOCK_GROUP_RAID1, BTRFS_BLOCK_GROUP_DUP,
	BTRFS_BLOCK_GROUP_RAID10, BTRFS_BLOCK_GROUP_RAID5,
	BTRFS_BLOCK_GROUP_RAID6, BTRFS_BLOCK_GROUP_RAID1C3,
	BTRFS_BLOCK_GROUP_RAID1C4,
};

/* Chunk starts seen at setup, for ranges near real addresses. */
static __u64 chunk_starts[MAX_CHUNKS];
static int nchunk_starts;

static __u64 pick_u64(void)
{
	switch (rnd_below(6)) {
	case 0:
	case 1:
	case 2:
		return PICK(u64_edges);
	case 3:
		return rnd_below(8);
	case 4:
		return rnd() >> rnd_below(64);
	default:
		return rnd();
	}
}

static __u32 pick_u32(void)
{
	switch (rnd_below(5)) {
	case 0:
	case 1:
	case 2:
		return PICK(u32_edges);
	case 3:
		return rnd_below(8);
	default:
		return (__u32)rnd();
	}
}

/* A logical or physical address: near a chunk, on a MiB, or an edge. */
static __u64 pick_addr(void)
{
	__u64 c;

	switch (rnd_below(4)) {
	case 0:
		return PICK(u64_edges);
	case 1:
		return rnd_below(2048) * SZ_1M;
	default:
		c = nchunk_starts ? chunk_starts[rnd_below(nchunk_starts)] : 0;
		return c + (chance(50) ? 0 : rnd_below(128) * SZ_1M) -
		       (chance(20) ? 1 : 0);
	}
}

static __u64 pick_profiles(void)
{
	__u64 p = 0;
	int i;

	switch (rnd_below(5)) {
	case 0:
		return pick_u64();
	case 1:
		return ~0ULL;
	default:
		for (i = 0; i <= (int)rnd_below(3); i++)
			p |= PICK(profile_bits);
		return p;
	}
}

static __u64 pick_target(void)
{
	switch (rnd_below(8)) {
	case 0:
		return pick_u64();
	case 1:
		return PICK(profile_bits) | PICK(profile_bits);
	case 2:
		return PICK(profile_bits) | (1ULL << rnd_below(3));
	default:
		return PICK(profile_bits);
	}
}

/* ---- Results: an errno (negative), 0, or a positive BTRFS_ERROR_* ---- */

struct errset {
	__u64 bits[4];
};

static int errset_index(int code)
{
	if (code > 0 && code < 16)
		return code;
	if (code <= 0 && code > -240)
		return 16 - code;
	return -1;
}

static void errset_add(struct errset *s, int code)
{
	int i = errset_index(code);

	if (i >= 0)
		s->bits[i / 64] |= 1ULL << (i % 64);
}

static void errset_del(struct errset *s, int code)
{
	int i = errset_index(code);

	if (i >= 0)
		s->bits[i / 64] &= ~(1ULL << (i % 64));
}

static bool errset_has(const struct errset *s, int code)
{
	int i = errset_index(code);

	return i >= 0 && (s->bits[i / 64] >> (i % 64)) & 1;
}

static const char *code_name(int code, char *buf, size_t size)
{
	const char *name;

	if (code == 0)
		return "0";
	if (code == EXCL_BUSY)
		return "BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS";
	if (code > 0) {
		snprintf(buf, size, "+%d", code);
		return buf;
	}
	name = strerrorname_np(-code);
	if (name)
		return name;
	snprintf(buf, size, "-%d", -code);
	return buf;
}

static void errset_print(const struct errset *s, char *buf, size_t size)
{
	char tmp[32];
	size_t len = 0;
	int i, code;

	buf[0] = '\0';
	for (i = 0; i < 256 && len < size; i++) {
		if (!((s->bits[i / 64] >> (i % 64)) & 1))
			continue;
		code = i < 16 ? i : 16 - i;
		len += snprintf(buf + len, size - len, "%s%s", len ? "," : "",
				code_name(code, tmp, sizeof(tmp)));
	}
}

/* ---- Argument memory: good, misaligned, read-only and bad pointers ---- */

enum ptr_mode {
	PTR_GOOD,	/* page 0, read-write */
	PTR_ODD,	/* page 0, misaligned */
	PTR_RO,		/* page 2, read-only: read works, write-back fails */
	PTR_NULL,
	PTR_UNMAPPED,	/* page 3, unmapped */
	PTR_NONE,	/* page 1, PROT_NONE */
	PTR_CROSS,	/* the end of page 0, running into page 1 */
	PTR_KERNEL,	/* the kernel's half of the address space */
	PTR_NONCANON,	/* not a canonical x86_64 address */
	NR_PTR_MODES
};

static const char * const ptr_names[NR_PTR_MODES] = {
	"good", "misaligned", "read-only", "NULL", "unmapped", "PROT_NONE",
	"crossing", "kernel", "non-canonical",
};

static char *arena;
static size_t page;

static int arena_setup(void)
{
	page = sysconf(_SC_PAGESIZE);
	arena = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED)
		return -errno;
	if (mprotect(arena + page, page, PROT_NONE) ||
	    mprotect(arena + 2 * page, page, PROT_READ) ||
	    munmap(arena + 3 * page, page))
		return -errno;
	return 0;
}

/* Is the page at @p unmapped still (nothing else took its place)? */
static bool unmapped(void *p)
{
	unsigned char vec;

	return mincore(p, page, &vec) && errno == ENOMEM;
}

static bool ptr_readable(int mode)
{
	return mode == PTR_GOOD || mode == PTR_ODD || mode == PTR_RO;
}

static bool ptr_writable(int mode)
{
	return mode == PTR_GOOD || mode == PTR_ODD;
}

/*
 * Where a call's struct of @size bytes goes, for @mode; @off is a random
 * number the call drew (so that the address follows from the seed).  The
 * struct is copied there as far as that memory can be written.
 */
static void *place_arg(int mode, __u64 off, const void *arg, size_t size)
{
	char *p;
	size_t k;

	switch (mode) {
	case PTR_GOOD:
		memcpy(arena, arg, size);
		return arena;
	case PTR_ODD:
		p = arena + 1 + off % (page - size - 1);
		memcpy(p, arg, size);
		return p;
	case PTR_RO:
		if (mprotect(arena + 2 * page, page, PROT_READ | PROT_WRITE))
			return NULL;
		memcpy(arena + 2 * page, arg, size);
		mprotect(arena + 2 * page, page, PROT_READ);
		return arena + 2 * page;
	case PTR_NULL:
		return NULL;
	case PTR_UNMAPPED:
		p = arena + 3 * page;
		/* Should the hole have been reused, NULL is as unmapped. */
		return unmapped(p) ? p + off % page : NULL;
	case PTR_NONE:
		return arena + page + off % page;
	case PTR_CROSS:
		/* 1 to size - 1 bytes in page 0, the rest in page 1. */
		switch (off % 4) {
		case 0:
			k = 1;
			break;
		case 1:
			k = size - 1;
			break;
		case 2:
			k = 8;
			break;
		default:
			k = 1 + (off >> 8) % (size - 1);
			break;
		}
		p = arena + page - k;
		memcpy(p, arg, k);
		return p;
	case PTR_KERNEL:
		return (void *)(0xffff888000000000ULL + (off % 4096) * page);
	default:
		return (void *)(0x8000000000000000ULL >> (off % 16));
	}
}

/* ---- Calls ---- */

enum call_kind {
	K_V2,		/* BTRFS_IOC_BALANCE_V2, in the calling thread */
	K_CTL,		/* BTRFS_IOC_BALANCE_CTL, any command value */
	K_PROGRESS,	/* BTRFS_IOC_BALANCE_PROGRESS */
	K_V1,		/* BTRFS_IOC_BALANCE, the legacy ioctl */
	K_BADNR,	/* a balance ioctl number with another size/direction */
	K_REMOUNT_RO,
	K_REMOUNT_RW,
	NR_KINDS
};

/* How the request of a V2 call looks from the request alone. */
enum request_class {
	REQ_INVALID,	/* check_balance_request() refuses it */
	REQ_VALID,	/* it passes every check, whatever the filesystem */
	REQ_DEPENDS,	/* valid unless it reduces redundancy: depends on the fs */
	REQ_RESUME,	/* RESUME: the args are not looked at */
};

static const char * const class_names[] = {
	"invalid", "valid", "valid-unless-reducing", "resume",
};

/* The kinds the statistics count separately. */
enum stat_kind {
	S_V2_NEW, S_V2_DRY, S_V2_RESUME, S_V2_BG, S_PAUSE, S_CANCEL,
	S_CTL_OTHER, S_PROGRESS, S_V1, S_BADNR, S_REMOUNT, S_UNPRIV, NR_STATS
};

static const char * const stat_names[NR_STATS] = {
	"V2 new request", "V2 valid dry run", "V2 resume",
	"V2 in the second thread",
	"ctl pause", "ctl cancel", "ctl other command", "progress",
	"legacy BALANCE", "other ioctl number", "remount",
	"without CAP_SYS_ADMIN",
};

struct call {
	int idx;
	enum call_kind kind;
	int fd_sel;
	int ptr;
	__u64 ptr_off;
	unsigned long nr;	/* K_BADNR: the ioctl number */
	unsigned long arg;	/* K_CTL: the command, as passed */
	struct btrfs_ioctl_balance_args req;
	struct btrfs_ioctl_balance_args out;	/* what the kernel wrote */
	enum request_class cls;
	bool dry;		/* a valid dry run, sent as one */
	/* The situation when it was made. */
	bool bg;		/* in the second thread */
	bool unpriv;		/* without CAP_SYS_ADMIN */
	bool ro;		/* the filesystem was read-only */
	bool bg_alive;		/* the second thread's balance was not joined */
	__u64 ctl_epoch;	/* pauses, cancels, remounts made before it */
	__u64 ro_epoch;		/* remounts read-only before it */
	bool relocated;		/* a balance may have relocated data before */
	int ret;
};

static const char * const fd_names[] = { "mnt", "file", "dir" };

/* ---- State of the run ---- */

struct fuzz {
	struct test_env env;
	int fds[3];		/* the mount point, a file, a directory */
	bool mounted;
	bool ro;
	__u64 ctl_epoch;
	__u64 ro_epoch;
	/*
	 * A balance ended since the last remount: the relocation's inode
	 * may still wait for its delayed iput (see allowed()).
	 */
	bool relocated;
	int calls;		/* made so far */
	int failed;
	int shown;
	/* The balance of the second thread. */
	struct balance_thread bt;
	struct call bg_call;
	bool bg_alive;
	/* Statistics: results per kind, hits on a running balance. */
	unsigned int stats[NR_STATS][256];
	unsigned int hit_pause, hit_cancel, hit_running, bg_paused;
	/* Dry runs that returned 0, by what they met (enum dry_beside). */
	unsigned int dry_ok[3];
	unsigned int dry_unmoved;	/* chunk tree compared, the same */
	unsigned int dry_checked;	/* estimate checked by the balance */
	/* Kernel log. */
	int kmsg_fd;
	int reports;
	int kmsg_shown;
	char history[HISTORY][512];
	int nhistory;
};

static struct fuzz F;

static int call_fd(const struct call *c)
{
	return F.fds[c->fd_sel];
}

static void args_desc(char *buf, size_t size, const char *name,
		      const struct btrfs_balance_args *a)
{
	static const struct btrfs_balance_args zero;
	size_t len;

	if (!memcmp(a, &zero, sizeof(zero))) {
		buf[0] = '\0';
		return;
	}
	len = snprintf(buf, size,
		       " %s{f=0x%llx p=0x%llx u=0x%llx dev=%llu d=0x%llx..0x%llx v=0x%llx..0x%llx t=0x%llx l=0x%llx s=%u..%u",
		       name, (unsigned long long)a->flags,
		       (unsigned long long)a->profiles,
		       (unsigned long long)a->usage,
		       (unsigned long long)a->devid,
		       (unsigned long long)a->pstart,
		       (unsigned long long)a->pend,
		       (unsigned long long)a->vstart,
		       (unsigned long long)a->vend,
		       (unsigned long long)a->target,
		       (unsigned long long)a->limit, a->stripes_min,
		       a->stripes_max);
	if (len < size)
		snprintf(buf + len, size - len, "%s}",
			 memcmp(a->unused, zero.unused, sizeof(a->unused)) ?
			 " unused!=0" : "");
}

static const char *call_desc(const struct call *c, char *buf, size_t size)
{
	char d[256], m[256], s[256];
	const char *who = c->bg ? "thread2" : c->unpriv ? "nocap" : "main";

	switch (c->kind) {
	case K_V2:
		args_desc(d, sizeof(d), "d", &c->req.data);
		args_desc(m, sizeof(m), "m", &c->req.meta);
		args_desc(s, sizeof(s), "s", &c->req.sys);
		snprintf(buf, size,
			 "#%d %s%s V2%s fd=%s ptr=%s(%llu) %s flags=0x%llx%s%s%s",
			 c->idx, who, c->ro ? " ro" : "",
			 c->dry ? " dry-run" : "", fd_names[c->fd_sel],
			 ptr_names[c->ptr], (unsigned long long)c->ptr_off,
			 class_names[c->cls], (unsigned long long)c->req.flags,
			 d, m, s);
		break;
	case K_CTL:
		snprintf(buf, size, "#%d %s%s CTL fd=%s cmd=0x%lx", c->idx,
			 who, c->ro ? " ro" : "", fd_names[c->fd_sel], c->arg);
		break;
	case K_PROGRESS:
		snprintf(buf, size, "#%d %s%s PROGRESS fd=%s ptr=%s(%llu)",
			 c->idx, who, c->ro ? " ro" : "", fd_names[c->fd_sel],
			 ptr_names[c->ptr], (unsigned long long)c->ptr_off);
		break;
	case K_V1:
		snprintf(buf, size, "#%d %s%s BALANCE(v1) fd=%s ptr=%s",
			 c->idx, who, c->ro ? " ro" : "", fd_names[c->fd_sel],
			 ptr_names[c->ptr]);
		break;
	case K_BADNR:
		snprintf(buf, size, "#%d %s%s ioctl 0x%lx fd=%s ptr=%s",
			 c->idx, who, c->ro ? " ro" : "", c->nr,
			 fd_names[c->fd_sel], ptr_names[c->ptr]);
		break;
	case K_REMOUNT_RO:
		snprintf(buf, size, "#%d remount read-only%s", c->idx,
			 c->bg_alive ? " (second thread in a balance)" : "");
		break;
	case K_REMOUNT_RW:
		snprintf(buf, size, "#%d remount read-write", c->idx);
		break;
	default:
		snprintf(buf, size, "#%d ?", c->idx);
		break;
	}
	return buf;
}

/* ---- The kernel log, read after every call ---- */

static const char * const report_patterns[] = {
	"WARNING:", "BUG:", "Oops", "kernel BUG", "general protection fault",
	"possible circular locking dependency", "possible recursive locking",
	"inconsistent lock state", "INFO: trying to register non-static key",
	"INFO: lockdep is turned off", "blocked for more than", "rcu: INFO:",
	"self-detected stall", "KASAN", "UBSAN", "Kernel panic",
	"Transaction aborted", "BTRFS critical",
};

static void kmsg_open(void)
{
	F.kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (F.kmsg_fd >= 0 && lseek(F.kmsg_fd, 0, SEEK_END) < 0) {
		close(F.kmsg_fd);
		F.kmsg_fd = -1;
	}
	if (F.kmsg_fd < 0)
		ksft_exit_fail_msg("cannot read /dev/kmsg: %s; a run that cannot check the kernel log proves nothing\n",
				   strerror(errno));
}

static void remember(const struct call *c)
{
	call_desc(c, F.history[F.nhistory % HISTORY], sizeof(F.history[0]));
	F.nhistory++;
}

/* Read what the kernel logged since the last look; print reports. */
static void kmsg_scan(void)
{
	static int context;	/* lines still printed after a report */
	char rec[8192];
	const char *msg;
	unsigned int i;
	ssize_t n;
	int j;

	if (F.kmsg_fd < 0)
		return;
	for (;;) {
		bool report = false;

		n = read(F.kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)	/* overwritten: go on */
			continue;
		if (n <= 0)
			return;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		rec[n - (rec[n - 1] == '\n')] = '\0';
		for (i = 0; i < ARRAY_SIZE(report_patterns) && !report; i++)
			report = strstr(msg, report_patterns[i]);
		if (report) {
			if (!F.reports) {
				ksft_print_msg("kernel report after %d calls; the last calls:\n",
					       F.calls);
				j = F.nhistory > HISTORY ? F.nhistory - HISTORY : 0;
				for (; j < F.nhistory; j++)
					ksft_print_msg("  %s\n",
						       F.history[j % HISTORY]);
			}
			F.reports++;
			context = 25;
		}
		if ((report || context > 0) && F.kmsg_shown < MAX_KMSG_SHOWN) {
			ksft_print_msg("kernel: %.*s\n", 300, msg);
			F.kmsg_shown++;
		}
		if (!report && context > 0)
			context--;
	}
}

/* ---- Requests ---- */

static bool args_valid(const struct btrfs_balance_args *a)
{
	__u64 f = a->flags;

	if ((f & BTRFS_BALANCE_ARGS_LIMIT) && (f & BTRFS_BALANCE_ARGS_LIMIT_RANGE))
		return false;
	if ((f & BTRFS_BALANCE_ARGS_LIMIT_RANGE) && a->limit_min > a->limit_max)
		return false;
	if (f & BTRFS_BALANCE_ARGS_USAGE_RANGE) {
		if (a->usage_min > 100 || a->usage_min > a->usage_max)
			return false;
	} else if ((f & BTRFS_BALANCE_ARGS_USAGE) && a->usage > 100) {
		return false;
	}
	if ((f & BTRFS_BALANCE_ARGS_DRANGE) && a->pstart > a->pend)
		return false;
	if ((f & BTRFS_BALANCE_ARGS_VRANGE) && a->vstart > a->vend)
		return false;
	if ((f & BTRFS_BALANCE_ARGS_STRIPES_RANGE) &&
	    a->stripes_min > a->stripes_max)
		return false;
	/* A target is one profile bit that 3 devices can hold, nothing else. */
	if ((f & BTRFS_BALANCE_ARGS_CONVERT) &&
	    (!a->target || (a->target & (a->target - 1)) ||
	     (a->target & ~TARGETS_3DEVS)))
		return false;
	return true;
}

/*
 * What check_balance_request() makes of @req, on this filesystem (3
 * read-write devices, no mixed block groups), after the args of the types
 * it does not select were cleared.
 */
static enum request_class classify(const struct btrfs_ioctl_balance_args *req)
{
	const struct btrfs_balance_args *args[] = {
		&req->data, &req->meta, &req->sys,
	};
	const __u64 types[] = {
		BTRFS_BALANCE_DATA, BTRFS_BALANCE_METADATA, BTRFS_BALANCE_SYSTEM,
	};
	enum request_class cls = REQ_VALID;
	unsigned int i;

	/* A dry run never resumes: refused before anything is looked at. */
	if (req->flags & BTRFS_BALANCE_RESUME)
		return (req->flags & BTRFS_BALANCE_DRY_RUN) ? REQ_INVALID :
							       REQ_RESUME;
	if (req->flags & ~KNOWN_FLAGS)
		return REQ_INVALID;
	for (i = 0; i < ARRAY_SIZE(args); i++) {
		if (!(req->flags & types[i]))
			continue;
		if ((args[i]->flags & ~KNOWN_ARGS_FLAGS) ||
		    !args_valid(args[i]))
			return REQ_INVALID;
		/*
		 * Metadata or system converted to a profile without
		 * redundancy: refused without FORCE when the filesystem
		 * has a redundant profile for it now.
		 */
		if (i > 0 && (args[i]->flags & BTRFS_BALANCE_ARGS_CONVERT) &&
		    !(args[i]->target & REDUNDANT) &&
		    !(req->flags & BTRFS_BALANCE_FORCE))
			cls = REQ_DEPENDS;
	}
	return cls;
}

static void gen_args_struct(struct btrfs_balance_args *a)
{
	static const __u64 filter_bits[] = {
		BTRFS_BALANCE_ARGS_PROFILES, BTRFS_BALANCE_ARGS_USAGE,
		BTRFS_BALANCE_ARGS_DEVID, BTRFS_BALANCE_ARGS_DRANGE,
		BTRFS_BALANCE_ARGS_VRANGE, BTRFS_BALANCE_ARGS_LIMIT,
		BTRFS_BALANCE_ARGS_LIMIT_RANGE,
		BTRFS_BALANCE_ARGS_STRIPES_RANGE,
		BTRFS_BALANCE_ARGS_USAGE_RANGE, BTRFS_BALANCE_ARGS_CONVERT,
		BTRFS_BALANCE_ARGS_SOFT,
	};
	unsigned int i;

	memset(a, 0, sizeof(*a));
	for (i = 0; i < ARRAY_SIZE(filter_bits); i++)
		if (chance(22))
			a->flags |= filter_bits[i];
	if (chance(10))		/* a flag bit no kernel knows */
		a->flags |= 1ULL << (11 + rnd_below(53));
	if (chance(3))
		a->flags = pick_u64();

	a->profiles = pick_profiles();
	if (chance(50)) {
		a->usage_min = pick_u32();
		a->usage_max = chance(60) ? pick_u32() : a->usage_min + rnd_below(120);
	} else {
		a->usage = pick_u64();
	}
	a->devid = chance(60) ? 1 + rnd_below(4) : pick_u64();
	a->pstart = pick_addr();
	a->pend = chance(60) ? a->pstart + rnd_below(256) * SZ_1M : pick_addr();
	a->vstart = pick_addr();
	a->vend = chance(60) ? a->vstart + rnd_below(256) * SZ_1M : pick_addr();
	a->target = pick_target();
	if (chance(50)) {
		a->limit_min = pick_u32();
		a->limit_max = chance(60) ? a->limit_min + rnd_below(4) : pick_u32();
	} else {
		a->limit = pick_u64();
	}
	a->stripes_min = pick_u32();
	a->stripes_max = chance(60) ? a->stripes_min + rnd_below(4) : pick_u32();
	if (chance(5))		/* reserved space: ignored */
		a->unused[rnd_below(ARRAY_SIZE(a->unused))] = pick_u64();
}

/*
 * Bound what a valid request can relocate: at most 0-2 chunks of each type
 * it selects, by a limit.
 */
static void cap_request(struct btrfs_ioctl_balance_args *req)
{
	struct btrfs_balance_args *args[] = { &req->data, &req->meta, &req->sys };
	unsigned int i;
	__u32 max;

	for (i = 0; i < ARRAY_SIZE(args); i++) {
		struct btrfs_balance_args *a = args[i];

		max = chance(80) ? rnd_below(2) : 2;
		if (a->flags & BTRFS_BALANCE_ARGS_LIMIT_RANGE) {
			if (a->limit_max > max)
				a->limit_max = max;
			if (a->limit_min > a->limit_max)
				a->limit_min = a->limit_max;
		} else if (a->flags & BTRFS_BALANCE_ARGS_LIMIT) {
			if (a->limit > max)
				a->limit = max;
		} else {
			a->flags |= BTRFS_BALANCE_ARGS_LIMIT;
			a->limit = max;
		}
	}
}

/* A valid request that relocates little: what an administrator would send. */
static void gen_valid_small(struct btrfs_ioctl_balance_args *req)
{
	struct btrfs_balance_args *args[] = { &req->data, &req->meta, &req->sys };
	const __u64 types[] = {
		BTRFS_BALANCE_DATA, BTRFS_BALANCE_METADATA, BTRFS_BALANCE_SYSTEM,
	};
	unsigned int i;

	memset(req, 0, sizeof(*req));
	while (!(req->flags & ALL_TYPES))
		req->flags = rnd_below(8);
	if (chance(25))
		req->flags |= BTRFS_BALANCE_FORCE;
	for (i = 0; i < ARRAY_SIZE(args); i++) {
		struct btrfs_balance_args *a = args[i];

		if (!(req->flags & types[i]))
			continue;
		switch (rnd_below(9)) {
		case 0:
			a->flags = BTRFS_BALANCE_ARGS_LIMIT;
			a->limit = rnd_below(3);
			break;
		case 1:
			a->flags = BTRFS_BALANCE_ARGS_LIMIT_RANGE;
			a->limit_min = rnd_below(2);
			a->limit_max = 1 + rnd_below(2);
			break;
		case 2:		/* below every chunk: selects nothing */
			a->flags = BTRFS_BALANCE_ARGS_VRANGE;
			a->vend = 1;
			break;
		case 3:
			a->flags = BTRFS_BALANCE_ARGS_USAGE;
			a->usage = rnd_below(3) * 5;
			break;
		case 4:
			a->flags = BTRFS_BALANCE_ARGS_USAGE_RANGE |
				   BTRFS_BALANCE_ARGS_LIMIT;
			a->usage_min = 0;
			a->usage_max = chance(50) ? 100 : 0xffffffff;
			a->limit = 1;
			break;
		case 5:
		case 6:
			a->flags = BTRFS_BALANCE_ARGS_CONVERT |
				   BTRFS_BALANCE_ARGS_SOFT;
			do {
				a->target = PICK(profile_bits);
			} while (!(a->target & TARGETS_3DEVS));
			if (!(a->target & REDUNDANT) && i > 0)
				req->flags |= BTRFS_BALANCE_FORCE;
			if (chance(50)) {
				a->flags |= BTRFS_BALANCE_ARGS_LIMIT;
				a->limit = 1;
			}
			break;
		case 7:
			a->flags = BTRFS_BALANCE_ARGS_DEVID |
				   BTRFS_BALANCE_ARGS_LIMIT;
			a->devid = 1 + rnd_below(NDEVS);
			a->limit = 1;
			if (chance(50)) {
				a->flags |= BTRFS_BALANCE_ARGS_DRANGE;
				a->pstart = 0;
				a->pend = pick_addr();
			}
			break;
		default:
			a->flags = BTRFS_BALANCE_ARGS_PROFILES |
				   BTRFS_BALANCE_ARGS_STRIPES_RANGE |
				   BTRFS_BALANCE_ARGS_LIMIT;
			a->profiles = pick_profiles();
			a->stripes_min = rnd_below(3);
			a->stripes_max = a->stripes_min + rnd_below(3);
			a->limit = 1;
			break;
		}
	}
}

static void gen_request(struct btrfs_ioctl_balance_args *req, bool capped)
{
	unsigned int i;
	__u64 *w;

	switch (rnd_below(20)) {
	case 0:
	case 1:		/* random bytes */
		w = (__u64 *)req;
		for (i = 0; i < sizeof(*req) / 8; i++)
			w[i] = chance(50) ? rnd() : 0;
		if (chance(50))
			req->flags &= KNOWN_FLAGS | (1ULL << rnd_below(64));
		break;
	case 2:
	case 3:
	case 4:
	case 5:
	case 6:
		gen_valid_small(req);
		break;
	default:	/* the fields one by one, from edges */
		memset(req, 0, sizeof(*req));
		req->flags = rnd_below(8);
		if (chance(30))
			req->flags |= BTRFS_BALANCE_FORCE;
		if (chance(4))
			req->flags |= BTRFS_BALANCE_RESUME;
		if (chance(12))
			req->flags |= 1ULL << (5 + rnd_below(59));
		gen_args_struct(&req->data);
		gen_args_struct(&req->meta);
		gen_args_struct(&req->sys);
		if (chance(5))	/* output fields: ignored on input */
			req->state = pick_u64();
		if (chance(5))
			req->stat.completed = pick_u64();
		if (capped && classify(req) != REQ_INVALID && chance(85))
			cap_request(req);
		break;
	}
}

static int pick_ptr(void)
{
	static const int modes[] = {
		PTR_ODD, PTR_RO, PTR_NULL, PTR_UNMAPPED, PTR_NONE, PTR_CROSS,
		PTR_CROSS, PTR_KERNEL, PTR_NONCANON,
	};

	return chance(65) ? PTR_GOOD : PICK(modes);
}

static void gen_common(struct call *c, enum call_kind kind)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->fd_sel = chance(70) ? 0 : 1 + rnd_below(2);
	c->ptr = PTR_GOOD;
	c->ptr_off = rnd();
}

static void gen_v2(struct call *c, bool bg)
{
	gen_common(c, K_V2);
	gen_request(&c->req, true);
	if (!bg)
		c->ptr = pick_ptr();
	c->cls = classify(&c->req);
}

/*
 * The second thread's request: mostly one that relocates a chunk or two,
 * so that the calls made meanwhile meet a running balance.
 */
static void gen_bg(struct call *c)
{
	struct btrfs_balance_args *args[] = {
		&c->req.data, &c->req.meta, &c->req.sys,
	};
	const __u64 types[] = {
		BTRFS_BALANCE_DATA, BTRFS_BALANCE_METADATA, BTRFS_BALANCE_SYSTEM,
	};
	unsigned int i;

	gen_common(c, K_V2);
	switch (rnd_below(20)) {
	case 0:
		memset(&c->req, 0, sizeof(c->req));
		c->req.flags = BTRFS_BALANCE_RESUME;
		break;
	case 1:
	case 2:
		gen_request(&c->req, true);
		break;
	case 3:
	case 4:
	case 5:
		gen_valid_small(&c->req);
		break;
	default:
		memset(&c->req, 0, sizeof(c->req));
		c->req.flags = chance(70) ? BTRFS_BALANCE_DATA : 0;
		if (chance(40))
			c->req.flags |= BTRFS_BALANCE_METADATA;
		if (chance(15) || !c->req.flags)
			c->req.flags |= BTRFS_BALANCE_SYSTEM;
		for (i = 0; i < ARRAY_SIZE(args); i++) {
			struct btrfs_balance_args *a = args[i];

			if (!(c->req.flags & types[i]))
				continue;
			a->flags = BTRFS_BALANCE_ARGS_LIMIT;
			a->limit = 1;
			if (chance(70))
				continue;
			a->flags |= BTRFS_BALANCE_ARGS_CONVERT |
				    BTRFS_BALANCE_ARGS_SOFT;
			do {
				a->target = PICK(profile_bits);
			} while (!(a->target & TARGETS_3DEVS));
			if (!(a->target & REDUNDANT) && i > 0)
				c->req.flags |= BTRFS_BALANCE_FORCE;
		}
		break;
	}
	c->cls = classify(&c->req);
}

/*
 * A valid dry run: a small request (every filter, converts with and
 * without soft), never a resume.
 */
static void gen_dry(struct call *c)
{
	struct btrfs_balance_args *args[] = {
		&c->req.data, &c->req.meta, &c->req.sys,
	};
	unsigned int i;

	gen_common(c, K_V2);
	gen_valid_small(&c->req);
	for (i = 0; i < ARRAY_SIZE(args); i++)
		if ((args[i]->flags & BTRFS_BALANCE_ARGS_CONVERT) && chance(50))
			args[i]->flags &= ~BTRFS_BALANCE_ARGS_SOFT;
	c->req.flags |= BTRFS_BALANCE_DRY_RUN;
	c->dry = true;
	c->cls = classify(&c->req);
}

static void gen_resume(struct call *c)
{
	gen_common(c, K_V2);
	/* Only the RESUME bit counts, and DRY_RUN; the rest may be anything. */
	if (chance(50))
		gen_request(&c->req, false);
	else
		memset(&c->req, 0, sizeof(c->req));
	c->req.flags |= BTRFS_BALANCE_RESUME;
	c->ptr = chance(80) ? PTR_GOOD : pick_ptr();
	c->cls = classify(&c->req);
}

static void gen_ctl(struct call *c, int cmd)
{
	static const unsigned long others[] = {
		0, 3, 4, ~0UL, 0x7fffffff, 0x80000000, 0xffffffff,
		0x100000000UL, 0x100000001UL, 0x100000002UL,
		0xffffffff00000001UL, 0x8000000000000002UL,
	};

	gen_common(c, K_CTL);
	if (cmd)
		c->arg = cmd;
	else
		c->arg = chance(70) ? PICK(others) : rnd();
}

static void gen_progress(struct call *c)
{
	gen_common(c, K_PROGRESS);
	c->ptr = pick_ptr();
}

static void gen_v1(struct call *c)
{
	gen_common(c, K_V1);
	c->ptr = pick_ptr();
}

static void gen_badnr(struct call *c)
{
	static const unsigned int nrs[] = { 12, 32, 33, 34 };
	static const unsigned int dirs[] = {
		_IOC_NONE, _IOC_READ, _IOC_WRITE, _IOC_READ | _IOC_WRITE,
	};
	unsigned long good[] = {
		BTRFS_IOC_BALANCE, BTRFS_IOC_BALANCE_V2, BTRFS_IOC_BALANCE_CTL,
		BTRFS_IOC_BALANCE_PROGRESS,
	};
	unsigned int i, size;
	unsigned long nr;

	gen_common(c, K_BADNR);
	c->ptr = pick_ptr();
	do {
		i = rnd_below(ARRAY_SIZE(nrs));
		size = chance(50) ? rnd_below(1 << _IOC_SIZEBITS) :
		       1016 + rnd_below(17);
		nr = _IOC(PICK(dirs), BTRFS_IOCTL_MAGIC, nrs[i], size);
	} while (nr == good[i]);
	c->nr = nr;
}

/* ---- Making calls ---- */

static int do_ioctl(int fd, unsigned long nr, void *arg)
{
	int ret = ioctl(fd, nr, arg);

	return ret < 0 ? -errno : ret;
}

static void exec_call(struct call *c)
{
	struct btrfs_ioctl_balance_args zero;
	void *p;

	switch (c->kind) {
	case K_V2:
		p = place_arg(c->ptr, c->ptr_off, &c->req, sizeof(c->req));
		c->ret = do_ioctl(call_fd(c), BTRFS_IOC_BALANCE_V2, p);
		if (ptr_writable(c->ptr))
			memcpy(&c->out, p, sizeof(c->out));
		break;
	case K_CTL:
		c->ret = ioctl(call_fd(c), BTRFS_IOC_BALANCE_CTL, c->arg);
		if (c->ret < 0)
			c->ret = -errno;
		break;
	case K_PROGRESS:
		memset(&zero, 0, sizeof(zero));
		p = place_arg(c->ptr, c->ptr_off, &zero, sizeof(zero));
		c->ret = do_ioctl(call_fd(c), BTRFS_IOC_BALANCE_PROGRESS, p);
		if (ptr_writable(c->ptr))
			memcpy(&c->out, p, sizeof(c->out));
		break;
	case K_V1:
		memset(&zero, 0, sizeof(zero));
		p = place_arg(c->ptr, c->ptr_off, &zero, sizeof(zero));
		c->ret = do_ioctl(call_fd(c), BTRFS_IOC_BALANCE, p);
		break;
	case K_BADNR:
		memset(&zero, 0, sizeof(zero));
		p = place_arg(c->ptr, c->ptr_off, &zero, sizeof(zero));
		c->ret = do_ioctl(call_fd(c), c->nr, p);
		break;
	case K_REMOUNT_RO:
		c->ret = mount(NULL, F.env.mnt, NULL, MS_REMOUNT | MS_RDONLY,
			       NULL) ? -errno : 0;
		break;
	case K_REMOUNT_RW:
		c->ret = mount(NULL, F.env.mnt, NULL, MS_REMOUNT, NULL) ?
			 -errno : 0;
		break;
	default:
		c->ret = -EINVAL;
		break;
	}
}

/* Record the situation a call is made in. */
static void situate(struct call *c, bool bg, bool unpriv)
{
	c->idx = F.calls++;
	c->bg = bg;
	c->unpriv = unpriv;
	c->ro = F.ro;
	c->bg_alive = F.bg_alive;
	c->ctl_epoch = F.ctl_epoch;
	c->ro_epoch = F.ro_epoch;
	c->relocated = F.relocated;
}

/* ---- What each call may return (docs/reliability.md) ---- */

static void allowed_v2(const struct call *c, struct errset *s)
{
	/* A pause, cancel or remount while the second thread's call ran. */
	bool overlap = c->bg && F.ctl_epoch != c->ctl_epoch;
	/*
	 * The second thread's call may meet the filesystem as it was when
	 * the thread started or as a remount made it since.
	 */
	bool may_ro = c->ro || (c->bg && F.ro_epoch != c->ro_epoch);
	bool may_rw = !c->ro || overlap;

	/* btrfs_ioctl_balance(): capable, mnt_want_write_file, memdup_user. */
	if (c->unpriv) {
		errset_add(s, -EPERM);
		return;
	}
	if (may_ro)
		errset_add(s, -EROFS);
	if (!may_rw)
		return;
	/*
	 * A valid dry run writes nothing and needs no exclusive operation
	 * beside a balance: it looks, alone or beside one.
	 */
	if (c->dry) {
		errset_add(s, 0);
		if (c->cls == REQ_DEPENDS)
			errset_add(s, -EINVAL);
		return;
	}
	if (!ptr_readable(c->ptr)) {
		errset_add(s, -EFAULT);
		return;
	}
	errset_add(s, -ENOMEM);
	/*
	 * btrfs_try_lock_balance(): a balance running or paused.  Not
	 * BTRFS_ERROR_DEV_EXCL_RUN_IN_PROGRESS: that is for another
	 * exclusive operation (device add, remove, replace, resize, swap
	 * activation), which the fuzzer never starts; another balance ioctl
	 * setting up or finishing is waited for.
	 */
	errset_add(s, -EINPROGRESS);

	switch (c->cls) {
	case REQ_RESUME:
		errset_add(s, -ENOTCONN);	/* nothing paused */
		break;
	case REQ_INVALID:
		errset_add(s, -EINVAL);
		return;
	case REQ_DEPENDS:
		errset_add(s, -EINVAL);
		break;
	case REQ_VALID:
		break;
	}
	/* The run: to its end, or chunks that did not fit. */
	errset_add(s, 0);
	errset_add(s, -ENOSPC);
	/*
	 * Only a pause or a cancel while it ran stops it, and only one
	 * pending when it starts refuses it: the second thread's balance.
	 */
	if (overlap) {
		errset_add(s, -ECANCELED);
		errset_add(s, -EINVAL);
	}
	/* Written back after 0 or -ECANCELED: fails on read-only memory. */
	if (!ptr_writable(c->ptr)) {
		errset_del(s, 0);
		errset_del(s, -ECANCELED);
		errset_add(s, -EFAULT);
	}
}

static void allowed_ctl(const struct call *c, struct errset *s)
{
	int cmd = (int)c->arg;	/* the handler takes an int */

	if (c->unpriv) {
		errset_add(s, -EPERM);
		return;
	}
	switch (cmd) {
	case BTRFS_BALANCE_CTL_PAUSE:
		/* Read-only: the remount paused it, nothing runs. */
		if (!c->ro)
			errset_add(s, 0);
		errset_add(s, -ENOTCONN);
		break;
	case BTRFS_BALANCE_CTL_CANCEL:
		errset_add(s, c->ro ? -EROFS : 0);
		errset_add(s, -ENOTCONN);
		break;
	default:
		errset_add(s, -EINVAL);
		break;
	}
}

static void allowed_progress(const struct call *c, struct errset *s)
{
	if (c->unpriv) {
		errset_add(s, -EPERM);
		return;
	}
	errset_add(s, -ENOTCONN);
	errset_add(s, -ENOMEM);
	errset_add(s, ptr_writable(c->ptr) ? 0 : -EFAULT);
}

static void allowed(const struct call *c, struct errset *s)
{
	memset(s, 0, sizeof(*s));
	switch (c->kind) {
	case K_V2:
		allowed_v2(c, s);
		break;
	case K_CTL:
		allowed_ctl(c, s);
		break;
	case K_PROGRESS:
		allowed_progress(c, s);
		break;
	case K_V1:
	case K_BADNR:
		/* No handler: btrfs_ioctl()'s default. */
		errset_add(s, -ENOTTY);
		break;
	case K_REMOUNT_RO:
		errset_add(s, 0);
		/*
		 * A balance ioctl in progress holds a write on the mount.  After
		 * a balance, the inode a data relocation used is unlinked
		 * (nlink 0, the superblock's remove count up) until its last
		 * reference, often a delayed iput, goes: until then
		 * sb_prepare_remount_readonly() says -EBUSY too.
		 */
		if (c->bg_alive || c->relocated)
			errset_add(s, -EBUSY);
		break;
	case K_REMOUNT_RW:
		errset_add(s, 0);
		break;
	default:
		break;
	}
}

/*
 * What a call that returned 0 wrote back: a new request comes back as
 * sent (the args of the types it does not select cleared), progress
 * holds known bits only; neither counts more chunks relocated than looked
 * at.  NULL when it is right.
 */
static const char *bad_output(const struct call *c)
{
	const struct btrfs_ioctl_balance_args *o = &c->out;
	struct btrfs_ioctl_balance_args want = c->req;

	if (c->ret != 0 || !ptr_writable(c->ptr))
		return NULL;
	if (c->kind == K_PROGRESS) {
		if (o->state & ~STATE_BITS)
			return "unknown state bits";
		if (o->flags & ~KNOWN_FLAGS)
			return "unknown flag bits";
		if (o->stat.completed > o->stat.considered)
			return "more chunks completed than considered";
		return NULL;
	}
	if (c->kind != K_V2)
		return NULL;
	if (o->stat.completed > o->stat.considered)
		return "more chunks completed than considered";
	if (c->cls == REQ_RESUME)
		return (o->flags & BTRFS_BALANCE_RESUME) &&
		       !(o->flags & ~KNOWN_FLAGS) ? NULL :
		       "resumed balance without RESUME or with unknown flags";
	if (!(want.flags & BTRFS_BALANCE_DATA))
		memset(&want.data, 0, sizeof(want.data));
	if (!(want.flags & BTRFS_BALANCE_METADATA))
		memset(&want.meta, 0, sizeof(want.meta));
	if (!(want.flags & BTRFS_BALANCE_SYSTEM))
		memset(&want.sys, 0, sizeof(want.sys));
	if (o->flags != want.flags)
		return "flags written back differ from the request";
	if (memcmp(&o->data, &want.data, sizeof(want.data)) ||
	    memcmp(&o->meta, &want.meta, sizeof(want.meta)) ||
	    memcmp(&o->sys, &want.sys, sizeof(want.sys)))
		return "args written back differ from the request";
	if (!c->bg && o->state)
		return "state written back is not 0";
	if ((c->req.flags & BTRFS_BALANCE_DRY_RUN) &&
	    (o->ext_flags != BTRFS_BALANCE_EXT_ESTIMATE ||
	     o->types[0].chunks_expected + o->types[1].chunks_expected +
	     o->types[2].chunks_expected != o->stat.expected))
		return "a dry run's estimate is not its types[] summed";
	return NULL;
}

static enum stat_kind stat_kind(const struct call *c)
{
	if (c->unpriv)
		return S_UNPRIV;
	switch (c->kind) {
	case K_V2:
		return c->bg ? S_V2_BG : c->dry ? S_V2_DRY :
		       c->cls == REQ_RESUME ? S_V2_RESUME : S_V2_NEW;
	case K_CTL:
		if ((int)c->arg == BTRFS_BALANCE_CTL_PAUSE)
			return S_PAUSE;
		if ((int)c->arg == BTRFS_BALANCE_CTL_CANCEL)
			return S_CANCEL;
		return S_CTL_OTHER;
	case K_PROGRESS:
		return S_PROGRESS;
	case K_V1:
		return S_V1;
	case K_BADNR:
		return S_BADNR;
	default:
		return S_REMOUNT;
	}
}

/* Count @c as failed and print it (the first MAX_SHOWN). */
static void call_failed(const struct call *c, const char *why,
			const char *allowed_set)
{
	char buf[1024], name[32];

	F.failed++;
	if (F.shown++ >= MAX_SHOWN)
		return;
	ksft_print_msg("FAILED %s -> %s: %s (allowed: %s)\n",
		       call_desc(c, buf, sizeof(buf)),
		       code_name(c->ret, name, sizeof(name)), why, allowed_set);
}

static void judge(const struct call *c)
{
	char set[512];
	const char *why = NULL;
	struct errset s;
	int i;

	if (c->kind == K_V2 && !(c->req.flags & BTRFS_BALANCE_DRY_RUN) &&
	    (c->ret == 0 || c->ret == -ECANCELED || c->ret == -ENOSPC))
		F.relocated = true;
	allowed(c, &s);
	if (!errset_has(&s, c->ret))
		why = "result outside its set";
	else
		why = bad_output(c);
	i = errset_index(c->ret);
	if (i >= 0 && i < 256)
		F.stats[stat_kind(c)][i]++;
	if (!c->unpriv && c->ret == 0 && c->kind == K_CTL) {
		if ((int)c->arg == BTRFS_BALANCE_CTL_PAUSE)
			F.hit_pause++;
		else if ((int)c->arg == BTRFS_BALANCE_CTL_CANCEL)
			F.hit_cancel++;
	}
	if (c->kind == K_PROGRESS && c->ret == 0 && ptr_writable(c->ptr) &&
	    (c->out.state & BTRFS_BALANCE_STATE_RUNNING))
		F.hit_running++;
	if (c->bg && c->ret == -ECANCELED)
		F.bg_paused++;
	if (!why)
		return;
	errset_print(&s, set, sizeof(set));
	call_failed(c, why, set);
}

static void call_now(struct call *c);
static int bg_join(void);

/* What a dry run met: no balance, a running one, a paused one. */
enum dry_beside { DRY_ALONE, DRY_RUNNING, DRY_PAUSED };

static const char * const dry_beside_names[] = {
	"alone", "beside a running balance", "beside a paused balance",
};

static struct chunk_list dry_before, dry_after;

/*
 * The same request as the dry run @dry, for real: it must relocate, per
 * type, the chunks the estimate said.  Only for small ones: a chunk or
 * two are what the fuzzer relocates elsewhere too.
 */
static void dry_run_then_balance(const struct call *dry)
{
	char why[256];
	struct call c;
	int i;

	c = *dry;
	c.dry = false;
	c.req.flags &= ~BTRFS_BALANCE_DRY_RUN;
	memset(&c.out, 0, sizeof(c.out));
	c.cls = classify(&c.req);
	call_now(&c);
	if (c.ret != 0)		/* -ENOSPC: judged as any balance */
		return;
	F.dry_checked++;
	for (i = 0; i < 3; i++) {
		__u64 said = dry->out.types[i].chunks_expected;
		__u64 did = c.out.types[i].chunks_done;

		if (said == did)
			continue;
		snprintf(why, sizeof(why),
			 "relocated %llu chunks of type %d, its dry run (#%d) said %llu",
			 (unsigned long long)did, i, dry->idx,
			 (unsigned long long)said);
		call_failed(&c, why, "the estimate");
		return;
	}
}

/*
 * A valid dry run from this thread.  Where nothing else can move a chunk
 * meanwhile (no second thread, no balance running), the chunk tree must be
 * the same after it; with no balance at all, the request may then run for
 * real (dry_run_then_balance()).
 */
static void dry_run_call(void)
{
	struct btrfs_ioctl_balance_args p;
	enum dry_beside beside;
	struct call c;
	bool look;
	int ret;

	gen_dry(&c);
	/* A second thread that is done moves nothing: judge it now. */
	if (F.bg_alive && balance_thread_done(&F.bt) && bg_join())
		return;
	ret = balance_progress(F.fds[0], &p);
	beside = ret == -ENOTCONN ? DRY_ALONE :
		 (p.state & BTRFS_BALANCE_STATE_RUNNING) ? DRY_RUNNING :
		 DRY_PAUSED;
	look = !F.bg_alive && beside != DRY_RUNNING &&
	       !read_chunks(F.fds[0], &dry_before);
	call_now(&c);
	if (c.ret != 0)
		return;
	F.dry_ok[beside]++;
	if (!look)
		return;
	if (read_chunks(F.fds[0], &dry_after) ||
	    !same_chunks(&dry_before, &dry_after)) {
		call_failed(&c, "the chunk tree changed across a dry run",
			    "no chunk moved");
		return;
	}
	F.dry_unmoved++;
	if (beside == DRY_ALONE && c.out.stat.expected <= 3 && chance(50))
		dry_run_then_balance(&c);
}

/* Make a call in this thread and judge it. */
static void call_now(struct call *c)
{
	situate(c, false, false);
	if (c->kind == K_CTL && ((int)c->arg == BTRFS_BALANCE_CTL_PAUSE ||
				 (int)c->arg == BTRFS_BALANCE_CTL_CANCEL))
		F.ctl_epoch++;
	remember(c);
	exec_call(c);
	judge(c);
	kmsg_scan();
}

/* ---- The second thread: a balance that the other calls meet ---- */

static int bg_join(void)
{
	__u64 end = now_ms() + HANG_MS;

	if (!F.bg_alive)
		return 0;
	while (!balance_thread_done(&F.bt)) {
		if (now_ms() > end) {
			ksft_print_msg("the balance of the second thread did not return in %d s\n",
				       HANG_MS / 1000);
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
	F.bg_call.ret = balance_thread_join(&F.bt);
	F.bg_call.out = F.bt.args;
	F.bg_alive = false;
	judge(&F.bg_call);
	kmsg_scan();
	return 0;
}

static int bg_start(struct call *c)
{
	int ret = bg_join();

	if (ret)
		return ret;
	situate(c, true, false);
	remember(c);
	F.bg_call = *c;
	ret = balance_thread_start(&F.bt, call_fd(c), &c->req);
	if (ret) {
		ksft_print_msg("pthread_create: %s\n", strerror(-ret));
		return ret;
	}
	F.bg_alive = true;
	return 0;
}

/* ---- Calls without CAP_SYS_ADMIN, from a thread of their own ---- */

struct unpriv_batch {
	struct call calls[UNPRIV_BATCH];
	int n;
	int err;
};

static void *unpriv_thread(void *arg)
{
	struct unpriv_batch *b = arg;
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = 0,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	int i;

	/* Capabilities are per thread: only this one loses CAP_SYS_ADMIN. */
	if (syscall(SYS_capget, &hdr, data)) {
		b->err = -errno;
		return NULL;
	}
	data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &=
		~CAP_TO_MASK(CAP_SYS_ADMIN);
	if (syscall(SYS_capset, &hdr, data)) {
		b->err = -errno;
		return NULL;
	}
	for (i = 0; i < b->n; i++)
		exec_call(&b->calls[i]);
	return NULL;
}

static int unpriv_calls(int n)
{
	struct unpriv_batch b;
	pthread_t tid;
	int i, ret;

	memset(&b, 0, sizeof(b));
	b.n = n;
	for (i = 0; i < n; i++) {
		struct call *c = &b.calls[i];

		switch (rnd_below(5)) {
		case 0:
			gen_v2(c, false);
			break;
		case 1:
			gen_ctl(c, 1 + rnd_below(2));
			break;
		case 2:
			gen_progress(c);
			break;
		case 3:
			gen_ctl(c, 0);
			break;
		default:
			gen_v1(c);
			break;
		}
		situate(c, false, true);
		remember(c);
	}
	ret = pthread_create(&tid, NULL, unpriv_thread, &b);
	if (ret) {
		ksft_print_msg("pthread_create: %s\n", strerror(ret));
		return -ret;
	}
	pthread_join(tid, NULL);
	if (b.err) {
		ksft_print_msg("cannot drop CAP_SYS_ADMIN: %s\n",
			       strerror(-b.err));
		return b.err;
	}
	for (i = 0; i < n; i++)
		judge(&b.calls[i]);
	kmsg_scan();
	return 0;
}

/* ---- Read-only phases ---- */

static int ro_left;

static void remount(bool ro)
{
	struct call c;

	memset(&c, 0, sizeof(c));
	c.kind = ro ? K_REMOUNT_RO : K_REMOUNT_RW;
	situate(&c, false, false);
	remember(&c);
	F.ctl_epoch++;
	exec_call(&c);
	judge(&c);
	kmsg_scan();
	if (!c.ret) {
		F.ro = ro;
		/* Read-write: the kernel may resume a paused balance. */
		F.relocated = !ro;
		if (ro)
			F.ro_epoch++;
	}
}

/* ---- The run ---- */

/*
 * Calls right after the second thread's balance started running: progress,
 * pause, cancel, resume, a new request.
 */
static void burst(int n)
{
	struct call c;
	unsigned int pick;

	while (n-- > 0) {
		pick = rnd_below(100);
		if (pick < 35) {
			gen_progress(&c);
			if (chance(70))
				c.ptr = PTR_GOOD;
		} else if (pick < 60) {
			gen_ctl(&c, BTRFS_BALANCE_CTL_PAUSE);
		} else if (pick < 75) {
			gen_ctl(&c, BTRFS_BALANCE_CTL_CANCEL);
		} else if (pick < 80) {
			gen_resume(&c);
		} else if (pick < 90) {
			dry_run_call();
			continue;
		} else {
			gen_v2(&c, false);
		}
		call_now(&c);
	}
}

/*
 * Calls until @ncalls were made in all, or until a kernel report comes:
 * what follows a report on the same filesystem would only repeat it, or
 * hide it.
 */
static int fuzz_calls(int ncalls, int reports_before)
{
	struct call c;
	unsigned int pick;
	int ret;

	while (F.calls < ncalls) {
		if (F.reports > reports_before) {
			ksft_print_msg("calls stopped at a kernel report; the next ones go to a new filesystem\n");
			return 0;
		}
		if (F.ro && --ro_left <= 0) {
			remount(false);
			if (F.ro)
				return -EIO;
			continue;
		}
		pick = rnd_below(1000);
		if (pick < 380) {
			gen_v2(&c, false);
			call_now(&c);
		} else if (pick < 420) {
			dry_run_call();
		} else if (pick < 510) {
			gen_bg(&c);
			ret = bg_start(&c);
			if (ret)
				return ret;
			if (chance(60)) {
				/* Timing only decides how many calls meet it. */
				wait_balance_running(F.fds[0], &F.bt, 5000);
				burst(1 + rnd_below(3));
			}
		} else if (pick < 550) {
			gen_resume(&c);
			call_now(&c);
		} else if (pick < 610) {
			gen_ctl(&c, BTRFS_BALANCE_CTL_PAUSE);
			call_now(&c);
		} else if (pick < 650) {
			gen_ctl(&c, BTRFS_BALANCE_CTL_CANCEL);
			call_now(&c);
		} else if (pick < 690) {
			gen_ctl(&c, 0);
			call_now(&c);
		} else if (pick < 840) {
			gen_progress(&c);
			call_now(&c);
		} else if (pick < 890) {
			gen_v1(&c);
			call_now(&c);
		} else if (pick < 950) {
			gen_badnr(&c);
			call_now(&c);
		} else if (pick < 970) {
			ret = unpriv_calls(UNPRIV_BATCH);
			if (ret)
				return ret;
		} else if (pick < 980) {
			ro_left = 5 + rnd_below(20);
			if (!F.ro)
				remount(true);
		} else {
			gen_resume(&c);
			call_now(&c);
		}
	}
	return 0;
}

/*
 * Cancel whatever balance is left and wait until there is none: the
 * second thread's returned, progress says none.
 */
static int stop_balances(int fd)
{
	__u64 end = now_ms() + HANG_MS;
	struct btrfs_ioctl_balance_args p;
	int ret;

	if (F.ro)
		remount(false);
	while (now_ms() < end) {
		/* -EROFS: forced read-only (a report says why). */
		F.ctl_epoch++;	/* the second thread's balance may stop */
		ret = F.ro ? -EROFS : balance_ctl(fd, BTRFS_BALANCE_CTL_CANCEL);
		if (ret && ret != -ENOTCONN) {
			ksft_print_msg("cancel at the end: %s\n",
				       strerror(-ret));
			if (ret == -EROFS && !bg_join())
				return ret;
			return ret == -EROFS ? -EIO : ret;
		}
		if (F.bg_alive && balance_thread_done(&F.bt))
			bg_join();
		if (!F.bg_alive && ret == -ENOTCONN &&
		    balance_progress(fd, &p) == -ENOTCONN)
			return 0;
		usleep(10 * 1000);
	}
	ksft_print_msg("a balance was still there after %d s of cancels\n",
		       HANG_MS / 1000);
	return -ETIMEDOUT;
}

/* ---- Setup and the checks at the end ---- */

static int make_test_fs(const struct test_env *env)
{
	char *argv[12 + NDEVS] = {
		"mkfs.btrfs", "-f", "-q", "-K", "-d", "single", "-m", "raid1",
		"-b", DEV_SIZE,
	};
	int i, n = 10;

	for (i = 0; i < NDEVS; i++)
		argv[n++] = (char *)env->devs[i];
	argv[n] = NULL;
	return run_cmd(argv);
}

static int open_fds(void)
{
	char path[PATH_SIZE];
	int i;

	F.fds[0] = open(F.env.mnt, O_RDONLY | O_DIRECTORY);
	pattern_path(path, F.env.mnt, 0);
	F.fds[1] = open(path, O_RDONLY);
	snprintf(path, sizeof(path), "%s/dir", F.env.mnt);
	F.fds[2] = open(path, O_RDONLY | O_DIRECTORY);
	for (i = 0; i < 3; i++)
		if (F.fds[i] < 0)
			return -errno;
	return 0;
}

static void close_fds(void)
{
	int i;

	for (i = 0; i < 3; i++) {
		if (F.fds[i] >= 0)
			close(F.fds[i]);
		F.fds[i] = -1;
	}
}

static int setup(int epoch)
{
	char path[PATH_SIZE];
	struct chunk_list *l;
	int i, ret;

	F.ro = false;
	ro_left = 0;
	nchunk_starts = 0;
	mkdir(F.env.mnt, 0755);
	while (!umount2(F.env.mnt, 0))
		;
	ret = make_test_fs(&F.env);
	if (ret) {
		ksft_print_msg("mkfs.btrfs failed (%d)\n", ret);
		return -EIO;
	}
	ret = mount_fs(&F.env, NDEVS, 0, MOUNT_OPTS);
	if (ret) {
		ksft_print_msg("mount: %s\n", strerror(-ret));
		return ret;
	}
	F.mounted = true;
	for (i = 0; i < NFILES; i++) {
		ret = write_pattern_file(F.env.mnt, i, file_sizes[i]);
		if (ret) {
			ksft_print_msg("write f%02d: %s\n", i, strerror(-ret));
			return ret;
		}
	}
	snprintf(path, sizeof(path), "%s/dir", F.env.mnt);
	if (mkdir(path, 0755))
		return -errno;
	ret = open_fds();
	if (ret)
		return ret;
	l = malloc(sizeof(*l));
	if (!l)
		return -ENOMEM;
	ret = read_chunks(F.fds[0], l);
	for (i = 0; !ret && i < l->n; i++)
		chunk_starts[nchunk_starts++] = l->c[i].start;
	if (!ret)
		ksft_print_msg("filesystem %d: %d devices of %s, %d chunks, %d files, from call #%d\n",
			       epoch, NDEVS, DEV_SIZE, l->n, NFILES, F.calls);
	free(l);
	return ret;
}

static int verify_files(void)
{
	__u64 bad;
	int i, ret;

	for (i = 0; i < NFILES; i++) {
		ret = verify_pattern_file(F.env.mnt, i, file_sizes[i], &bad);
		if (ret) {
			ksft_print_msg("f%02d: %s at offset %llu\n", i,
				       strerror(-ret),
				       (unsigned long long)bad);
			return ret;
		}
	}
	return 0;
}

static void print_stats(void)
{
	char line[1024], name[32];
	size_t len;
	int k, i;

	for (k = 0; k < NR_STATS; k++) {
		len = 0;
		line[0] = '\0';
		for (i = 0; i < 256; i++) {
			if (!F.stats[k][i])
				continue;
			len += snprintf(line + len, sizeof(line) - len,
					"%s %s x%u", len ? "," : "",
					code_name(i < 16 ? i : 16 - i, name,
						  sizeof(name)),
					F.stats[k][i]);
			if (len >= sizeof(line))
				break;
		}
		if (len)
			ksft_print_msg("  %-26s%s\n", stat_names[k], line);
	}
	ksft_print_msg("calls that met a balance: %u pauses returned 0 (a running one stopped), %u cancels returned 0 (a running or paused one ended), %u progress calls saw one running, %u second-thread balances were stopped (-ECANCELED)\n",
		       F.hit_pause, F.hit_cancel, F.hit_running, F.bg_paused);
	ksft_print_msg("valid dry runs that returned 0: %u %s, %u %s, %u %s; chunk tree the same across %u of them; %u estimates checked against the balance run after\n",
		       F.dry_ok[DRY_ALONE], dry_beside_names[DRY_ALONE],
		       F.dry_ok[DRY_RUNNING], dry_beside_names[DRY_RUNNING],
		       F.dry_ok[DRY_PAUSED], dry_beside_names[DRY_PAUSED],
		       F.dry_unmoved, F.dry_checked);
}

/* ---- Parameters ---- */

/* -o value, else $env, else restriper.<key>= on the kernel command line. */
static const char *param(const char *opt, const char *env, const char *key,
			 char *buf, size_t size)
{
	const char *v = opt;

	if (!v)
		v = getenv(env);
	if (!v || !*v)
		v = kernel_cmdline_get(key, buf, size) ? buf : NULL;
	return v && *v ? v : NULL;
}

enum {
	T_CALLS, T_KMSG, T_STOPPED, T_BALANCE, T_CHECK, T_FILES, T_NR
};

static __noreturn void finish(void)
{
	ksft_print_cnts();
	printf("# fuzz: %d calls, %d failed\n", F.calls, F.failed);
	if (ksft_get_fail_cnt())
		exit(KSFT_FAIL);
	exit(ksft_get_xskip_cnt() ? KSFT_SKIP : KSFT_PASS);
}

/* The checks at the end of each filesystem: how many failed. */
static int epochs, bad_left, bad_balance, bad_check, bad_files;

/*
 * One filesystem: make it, make calls until @target calls in all, then the
 * checks.  Returns 0, or -errno when the run cannot go on (a balance that
 * does not stop, a filesystem that cannot be made or unmounted).
 */
static int run_epoch(int epoch, int target)
{
	struct btrfs_ioctl_balance_args full;
	int reports = F.reports;
	char op[64], name[32];
	int ret, item;

	epochs++;
	ret = setup(epoch);
	if (ret) {
		ksft_print_msg("filesystem %d: setup failed: %s\n", epoch,
			       strerror(-ret));
		return ret;
	}
	ret = fuzz_calls(target, reports);
	if (ret)
		return ret;
	ret = stop_balances(F.fds[0]);
	if (ret && ret != -EROFS)
		return ret;
	if (ret) {
		bad_left++;
		bad_balance++;
		ksft_print_msg("filesystem %d: read-only, its balance cannot be canceled\n",
			       epoch);
	} else {
		item = balance_item_present(F.fds[0]);
		ret = exclusive_operation(F.fds[0], op, sizeof(op));
		if (item || ret || strcmp(op, "none")) {
			bad_left++;
			ksft_print_msg("filesystem %d: a balance is left after cancel (balance item: %d, exclusive operation: %s)\n",
				       epoch, item, ret ? strerror(-ret) : op);
		}
		memset(&full, 0, sizeof(full));
		full.flags = ALL_TYPES;
		ret = balance_v2(F.fds[0], &full);
		/*
		 * The calls can leave the small devices full of chunks of
		 * other profiles: a full balance may then find no room for
		 * a copy, which it reports as ENOSPC, and that is all.
		 */
		if (ret == -ENOSPC) {
			ksft_print_msg("filesystem %d: a full balance ran out of space (ENOSPC)\n",
				       epoch);
		} else if (ret) {
			bad_balance++;
			ksft_print_msg("filesystem %d: a full balance returned %s\n",
				       epoch, code_name(ret, name, sizeof(name)));
		}
		kmsg_scan();
	}

	close_fds();
	ret = umount_fs(F.env.mnt);
	if (ret) {
		ksft_print_msg("filesystem %d: umount: %s\n", epoch,
			       strerror(-ret));
		return ret;
	}
	F.mounted = false;
	if (check_fs(&F.env, NDEVS)) {
		bad_check++;
		ksft_print_msg("filesystem %d: btrfs check --readonly failed\n",
			       epoch);
	}
	ret = mount_fs(&F.env, NDEVS, 0, MOUNT_OPTS);
	if (!ret) {
		F.mounted = true;
		ret = verify_files();
	} else {
		ksft_print_msg("filesystem %d: mount: %s\n", epoch,
			       strerror(-ret));
	}
	if (ret)
		bad_files++;
	kmsg_scan();
	ret = umount_fs(F.env.mnt);
	if (!ret)
		F.mounted = false;
	return ret;
}

int main(int argc, char **argv)
{
	const char *opt_seed = NULL, *opt_calls = NULL, *opt_epoch = NULL;
	const char *v;
	char buf[64];
	__u64 seed, t0, ms;
	int ncalls = DEFAULT_CALLS, epoch_calls = DEFAULT_EPOCH;
	int ret, opt, epoch, target;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "s:n:e:h")) != -1) {
		switch (opt) {
		case 's':
			opt_seed = optarg;
			break;
		case 'n':
			opt_calls = optarg;
			break;
		case 'e':
			opt_epoch = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-s SEED] [-n CALLS] [-e CALLS_PER_FILESYSTEM]\n",
				argv[0]);
			return opt == 'h' ? 0 : KSFT_FAIL;
		}
	}
	v = param(opt_seed, "RESTRIPER_FUZZ_SEED", "fuzz_seed",
		  buf, sizeof(buf));
	if (v)
		seed = strtoull(v, NULL, 0);
	else
		seed = (__u64)time(NULL) ^ ((__u64)getpid() << 32) ^ now_ms();
	v = param(opt_calls, "RESTRIPER_FUZZ_CALLS", "fuzz_calls",
		  buf, sizeof(buf));
	if (v)
		ncalls = atoi(v);
	v = param(opt_epoch, "RESTRIPER_FUZZ_EPOCH", "fuzz_epoch",
		  buf, sizeof(buf));
	if (v)
		epoch_calls = atoi(v);

	ksft_print_header();
	ksft_set_plan(T_NR);
	printf("# fuzz seed %llu\n", (unsigned long long)seed);
	ksft_print_msg("balance_fuzz: %d calls, a new filesystem every %d (replay: RESTRIPER_FUZZ_SEED=%llu, or restriper.fuzz_seed=%llu on the kernel command line)\n",
		       ncalls, epoch_calls > 0 ? epoch_calls : ncalls,
		       (unsigned long long)seed, (unsigned long long)seed);
	rng_state = seed;
	F.fds[0] = F.fds[1] = F.fds[2] = -1;
	F.kmsg_fd = -1;

	if (ncalls < 1 || epoch_calls < 0) {
		tap_result(false, "calls return documented errnos");
		ksft_print_msg("calls %d, calls per filesystem %d: need at least 1 and 0 (all) or more\n",
			       ncalls, epoch_calls);
		tap_skip_rest(T_NR, "bad parameters");
		finish();
	}
	if (env_load(&F.env) < NDEVS) {
		ksft_print_msg("BTRFS_TEST_DEVS names %d devices, %d needed\n",
			       F.env.ndevs, NDEVS);
		tap_skip_rest(T_NR, "not enough devices");
		finish();
	}
	if (geteuid()) {
		tap_skip_rest(T_NR, "not root");
		finish();
	}
	ret = arena_setup();
	if (ret) {
		tap_result(false, "calls return documented errnos");
		ksft_print_msg("argument pages: %s\n", strerror(-ret));
		tap_skip_rest(T_NR, "no argument pages");
		finish();
	}

	kmsg_open();
	t0 = now_ms();
	ret = 0;
	for (epoch = 1; !ret && F.calls < ncalls; epoch++) {
		target = epoch_calls ? F.calls + epoch_calls : ncalls;
		ret = run_epoch(epoch, target < ncalls ? target : ncalls);
	}
	ms = now_ms() - t0;
	kmsg_scan();
	ksft_print_msg("%d calls on %d filesystem(s) in %llu.%03llu s; results per kind:\n",
		       F.calls, epochs, (unsigned long long)ms / 1000,
		       (unsigned long long)ms % 1000);
	print_stats();
	if (F.shown > MAX_SHOWN)
		ksft_print_msg("(%d more failed calls not shown)\n",
			       F.shown - MAX_SHOWN);
	tap_result(!ret && !F.failed && F.calls >= ncalls,
		   "calls return documented errnos (%d of %d failed%s)",
		   F.failed, F.calls, F.calls < ncalls ? ", not all made" : "");
	tap_result(!F.reports, "no kernel report during the calls (%d report lines)",
		   F.reports);
	if (ret) {
		ksft_print_msg("the run stopped: %s\n", strerror(-ret));
		tap_skip_rest(T_NR, "the run could not go on");
		goto out;
	}
	tap_result(!bad_left, "no balance left after cancel (%d of %d filesystems failed)",
		   bad_left, epochs);
	tap_result(!bad_balance,
		   "a full balance after the calls runs to its end or to ENOSPC (%d of %d failed)",
		   bad_balance, epochs);
	tap_result(!bad_check, "btrfs check --readonly is clean (%d of %d failed)",
		   bad_check, epochs);
	tap_result(!bad_files, "files intact after a remount (%d of %d failed)",
		   bad_files, epochs);

out:
	/* After a failure: a hung balance stays, it is the report. */
	if (F.bg_alive && F.fds[0] >= 0) {
		balance_ctl(F.fds[0], BTRFS_BALANCE_CTL_CANCEL);
		if (balance_thread_done(&F.bt)) {
			balance_thread_join(&F.bt);
			F.bg_alive = false;
		}
	}
	close_fds();
	if (F.mounted && !F.bg_alive)
		umount_fs(F.env.mnt);
	if (F.kmsg_fd >= 0)
		close(F.kmsg_fd);
	finish();
}
