// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * dma-buf MRs over a buffer that moves: roxe must follow the exporter's
 * move_notify (drop its kernel mapping) and map the buffer again when the
 * data path next needs it, with the bytes where the exporter put them.
 *
 *   dmabuf-move DEV GID_INDEX
 *
 * The exporter is tests/kmod/roxe_dmabuf_mover.ko (/dev/roxe_mover, ABI in
 * tests/kmod/roxe_dmabuf_mover.h): a dynamic exporter (it has pin and
 * unpin ops) whose MOVE copies a buffer into fresh pages, refused with
 * EBUSY while it is pinned or, after move_notify, while an importer still
 * holds a dma_buf_vmap of it. PEEK and POKE read and write the current
 * pages; STATS counts moves, vmap op calls, live vmaps and pins.
 *
 * Two RC QPs on DEV are connected to each other through the GID at
 * GID_INDEX (loopback), with rnr_retry 7, retry_cnt 7 and timeout 14, so
 * that an operation that meets an unmapped buffer can be retried until
 * roxe has mapped it again. QP a posts; the dma-buf MR is on the far side
 * (QP b's responder) for RDMA WRITE and READ, and the local side for SEND.
 *
 *   0. The exporter alone: bad CREATE sizes, unknown flags and a foreign fd
 *      are refused; an unregistered buffer moves, its bytes with it, late
 *      too (PEEK waits for the copy).
 *   a. 1 MiB buffer, registered whole: roxe must not pin it (today's roxe
 *      does: the FAIL "roxe pinned the buffer: no re-validation", and the
 *      steps that need a move are skipped).
 *   b. RDMA WRITE of 1 MiB (pattern 1) into it: PEEK shows it.
 *   c. MOVE succeeds: moves=1, live_vmaps=0 (roxe dropped its mapping).
 *   d. RDMA READ of all of it: pattern 1 (kept across the move, read through
 *      roxe's new mapping), and the vmap op was called again.
 *   e. RDMA WRITE of pattern 2: PEEK shows it in the new pages.
 *   f. POKE pattern 3, MOVE, then a SEND of 1 MiB from the dma-buf MR (the
 *      local read path maps again too) lands byte-exact in a receive in an
 *      ordinary MR.
 *   g. Stress: a thread MOVEs the buffer 200 times at random moments while
 *      the main thread runs at least 200 rounds of a 64 KiB RDMA WRITE of a
 *      new pattern into one of the buffer's 16 slots and an RDMA READ of it
 *      back: every completion succeeds, every read-back is the write, every
 *      MOVE succeeds, and PEEK of the whole buffer shows every slot's last
 *      pattern.
 *   h. Late copies (MOVE with ROXE_MOVER_LATE_COPY: the bytes follow 50 ms
 *      later behind a fence of kernel usage, as a GPU's copy engine moves
 *      them): 8 rounds of WRITE, late MOVE, READ back (the READ must see
 *      the bytes, not the zeroed new pages: roxe waited for the fence
 *      before it mapped the buffer again), then late MOVE, WRITE, PEEK (the
 *      WRITE must not be overwritten by the copy of the old bytes).
 *   i. Deregistration: live_vmaps=0, pins=0, vmap and vunmap op calls match.
 *   j. Device memory: a VRAM buffer (I/O memory until pinned) registers,
 *      pinned by roxe (pins=1), moves no more (EBUSY), carries a WRITE and
 *      a READ, and lets go of the pin at deregistration; an IOMEM buffer
 *      (I/O memory for good) is refused (EOPNOTSUPP) with no pin or
 *      mapping left behind.
 *
 * Prints one "ok   ..." or "FAIL ..." line per check ("skip ..." for steps
 * that cannot run) and a summary; exits 0 only if every check passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "../kmod/roxe_dmabuf_mover.h"

#define PAGE 4096u
#define BUF_LEN (1u << 20)
#define IOVA 0x7e0000000000ull /* the dma-buf MR's first byte */
#define SLOT_LEN (64u << 10)   /* stress: one write and read-back */
#define SLOTS (BUF_LEN / SLOT_LEN)
#define STRESS_ROUNDS 200
#define LATE_ROUNDS 8
#define STRESS_MOVES 200
#define WC_SECONDS 60

static int failed, passed;

static void report(int good, const char *fmt, ...)
{
	va_list ap;

	fputs(good ? "ok   " : "FAIL ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (good)
		passed++;
	else
		failed++;
}

static void skip(const char *what)
{
	printf("skip %s\n", what);
}

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	printf("dmabuf-move: %d ok, %d failed, stopped early\n", passed, failed + 1);
	exit(1);
}

/* --- The exporter ------------------------------------------------------- */

static int mover;

static int mv_create_flags(uint64_t size, uint32_t flags)
{
	struct roxe_mover_create c = { .size = size, .flags = flags };

	return ioctl(mover, ROXE_MOVER_CREATE, &c) ? -1 : c.fd;
}

static int mv_create(uint64_t size)
{
	return mv_create_flags(size, 0);
}

/* 0 or the errno of the MOVE. */
static int mv_move_flags(int fd, uint32_t flags)
{
	struct roxe_mover_move m = { .fd = fd, .flags = flags };

	return ioctl(mover, ROXE_MOVER_MOVE, &m) ? errno : 0;
}

static int mv_move(int fd)
{
	return mv_move_flags(fd, 0);
}

static void mv_io(int fd, unsigned long cmd, uint64_t off, void *p, size_t len)
{
	struct roxe_mover_io io = { .fd = fd, .offset = off, .len = len,
				    .ptr = (uint64_t)(uintptr_t)p };

	if (ioctl(mover, cmd, &io))
		die(cmd == ROXE_MOVER_PEEK ? "PEEK" : "POKE");
}

static struct roxe_mover_stats mv_stats(int fd)
{
	struct roxe_mover_stats s = { .fd = fd };

	if (ioctl(mover, ROXE_MOVER_STATS, &s))
		die("STATS");
	return s;
}

static const char *stats_str(const struct roxe_mover_stats *s)
{
	static char str[160];

	snprintf(str, sizeof(str), "moves=%llu vmap_calls=%llu vunmap_calls=%llu live_vmaps=%llu pins=%llu",
		 (unsigned long long)s->moves, (unsigned long long)s->vmap_calls,
		 (unsigned long long)s->vunmap_calls, (unsigned long long)s->live_vmaps,
		 (unsigned long long)s->pins);
	return str;
}

/* --- Patterns ------------------------------------------------------------ */

static uint8_t pat(uint32_t seed, size_t i)
{
	uint32_t x = seed ^ (uint32_t)(i * 2654435761u);

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	return (uint8_t)(x ^ (x >> 15));
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

/* -1 if p[0..n) is the pattern, else the first byte that is not. */
static long mismatch(const uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return (long)i;
	return -1;
}

static void check_pattern(const char *what, const uint8_t *p, size_t n, uint32_t seed)
{
	long at = mismatch(p, n, seed);

	if (at < 0)
		report(1, "%s", what);
	else
		report(0, "%s: first wrong byte at %ld of %zu", what, at, n);
}

/*
 * peek_buf takes the buffer's bytes through the exporter; image is what
 * they should be, kept step by step.
 */
static uint8_t *peek_buf, *image;

static void check_peek(const char *what, int fd, uint32_t seed)
{
	memset(peek_buf, 0, BUF_LEN);
	mv_io(fd, ROXE_MOVER_PEEK, 0, peek_buf, BUF_LEN);
	check_pattern(what, peek_buf, BUF_LEN, seed);
}

/* --- Verbs --------------------------------------------------------------- */

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		die("create QP");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("QP to INIT");
	return qp;
}

/*
 * qp to RTS, talking to the QP numbered dest on the same device. RNR
 * retries forever, quickly (min_rnr_timer 1: 0.01 ms); transport retries
 * 7 times after 67 ms each (timeout 14): room for roxe to map the buffer
 * again whichever way it makes the requester wait.
 */
static void connect_qp(struct ibv_qp *qp, uint32_t dest, uint32_t my_psn, uint32_t dest_psn,
		       const union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dest,
		.rq_psn = dest_psn, .max_dest_rd_atomic = 4, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = *gid, .sgid_index = gid_index, .hop_limit = 64 } },
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("QP to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = my_psn;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS");
}

/* The next completion within WC_SECONDS, or -1. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			die("poll CQ");
		if (n)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > WC_SECONDS)
			return -1;
		usleep(50);
	}
}

/* NULL if the next completion on cq succeeded, else why not. */
static const char *wc_error(struct ibv_cq *cq, struct ibv_wc *wc)
{
	static char why[120];

	if (wait_wc(cq, wc))
		return "no completion within 60 s";
	if (wc->status == IBV_WC_SUCCESS)
		return NULL;
	snprintf(why, sizeof(why), "completion status %d (%s)", wc->status,
		 ibv_wc_status_str(wc->status));
	return why;
}

static int expect_ok(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	const char *why = wc_error(cq, &wc);

	if (why)
		report(0, "%s: %s", what, why);
	else
		report(1, "%s", what);
	return !why;
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t laddr, uint32_t len,
		 uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("post send");
}

static void post_recv(struct ibv_qp *qp, uint64_t addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("post receive");
}

static struct ibv_mr *plain_mr(struct ibv_pd *pd, uint8_t **buf)
{
	struct ibv_mr *mr;

	if (posix_memalign((void **)buf, PAGE, BUF_LEN))
		die("allocate an ordinary buffer");
	memset(*buf, 0, BUF_LEN);
	mr = ibv_reg_mr(pd, *buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("register an ordinary MR");
	return mr;
}

/* --- 0. The exporter alone ----------------------------------------------- */

static void exporter_checks(void)
{
	uint8_t in[2 * PAGE], out[2 * PAGE];
	struct roxe_mover_stats s;
	int nul = open("/dev/null", O_RDWR), fd, e;

	errno = 0;
	report(mv_create(0) < 0 && errno == EINVAL, "CREATE of 0 bytes is refused (EINVAL)");
	errno = 0;
	report(mv_create(PAGE + 1) < 0 && errno == EINVAL,
	       "CREATE of a size that is not a page multiple is refused (EINVAL)");
	errno = 0;
	report(mv_create(ROXE_MOVER_MAX_SIZE + PAGE) < 0 && errno == EINVAL,
	       "CREATE over 64 MiB is refused (EINVAL)");
	e = mv_move(nul);
	report(e == EINVAL, "MOVE of a file that is not a dma-buf is refused (EINVAL)%s%s",
	       e == EINVAL ? "" : ": ", e == EINVAL ? "" : e ? strerror(e) : "it succeeded");
	close(nul);

	fd = mv_create(2 * PAGE);
	if (fd < 0)
		die("CREATE a 2-page buffer");
	memset(out, 0xff, sizeof(out));
	mv_io(fd, ROXE_MOVER_PEEK, 0, out, sizeof(out));
	memset(in, 0, sizeof(in));
	report(!memcmp(in, out, sizeof(in)), "a new buffer is zeroed");
	fill(in, sizeof(in), 99);
	mv_io(fd, ROXE_MOVER_POKE, 0, in, sizeof(in));
	e = mv_move(fd);
	report(!e, "an unregistered buffer moves: %s", e ? strerror(e) : "MOVE succeeded");
	memset(out, 0, sizeof(out));
	mv_io(fd, ROXE_MOVER_PEEK, 0, out, sizeof(out));
	report(!memcmp(in, out, sizeof(in)), "its bytes moved with it");
	fill(in, sizeof(in), 98);
	mv_io(fd, ROXE_MOVER_POKE, 0, in, sizeof(in));
	e = mv_move_flags(fd, ROXE_MOVER_LATE_COPY);
	memset(out, 0, sizeof(out));
	mv_io(fd, ROXE_MOVER_PEEK, 0, out, sizeof(out));
	report(!e && !memcmp(in, out, sizeof(in)),
	       "a late move (the copy behind a fence): %s, and PEEK waits for its bytes",
	       e ? strerror(e) : "succeeded");
	e = mv_move_flags(fd, 1u << 7);
	report(e == EINVAL, "MOVE with an unknown flag is refused (EINVAL)");
	errno = 0;
	report(mv_create_flags(PAGE, 1u << 7) < 0 && errno == EINVAL,
	       "CREATE with an unknown flag is refused (EINVAL)");
	{
		struct roxe_mover_io io = { .fd = fd, .offset = PAGE, .len = PAGE + 1,
					    .ptr = (uint64_t)(uintptr_t)out };

		errno = 0;
		report(ioctl(mover, ROXE_MOVER_PEEK, &io) && errno == EINVAL,
		       "PEEK past the buffer's end is refused (EINVAL)");
	}
	s = mv_stats(fd);
	report(s.moves == 2 && !s.vmap_calls && !s.live_vmaps && !s.pins && !s.pin_calls,
	       "its STATS: %s", stats_str(&s));
	close(fd);
}

/* --- g. Stress ----------------------------------------------------------- */

struct stress {
	int fd;
	atomic_int rounds;   /* rounds the main thread finished */
	atomic_int round_us; /* how long its last round took */
	atomic_int stop;
	atomic_int done;     /* the mover made all its moves */
	int moves, errors, first_error;
};

/*
 * STRESS_MOVES moves, each at a random moment within a round of the
 * traffic (a random sleep of up to one round's time), at most two ahead
 * of the rounds, so that the moves spread over the whole run.
 */
static void *mover_thread(void *arg)
{
	struct stress *st = arg;
	unsigned int seed = 7;

	for (int i = 0; i < STRESS_MOVES && !atomic_load(&st->stop); i++) {
		int us, e;

		while (!atomic_load(&st->stop) && i >= atomic_load(&st->rounds) + 2)
			usleep(100);
		us = atomic_load(&st->round_us);
		if (us > 200000)
			us = 200000;
		usleep(rand_r(&seed) % (us + 1));
		e = mv_move(st->fd);
		if (!e) {
			st->moves++;
		} else if (!st->errors++) {
			st->first_error = e;
		}
	}
	atomic_store(&st->done, 1);
	return NULL;
}

static long long now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000ll + t.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct roxe_mover_stats s, s0;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_mr *mr, *src_mr, *dst_mr;
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *qpa, *qpb;
	struct ibv_pd *pd;
	struct ibv_wc wc;
	union ibv_gid gid;
	uint8_t *src, *dst;
	int gid_index, dfd, e, can_move, qp_ok = 1;
	uint32_t psna, psnb;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEV GID_INDEX\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	gid_index = atoi(argv[2]);
	mover = open(ROXE_MOVER_DEV, O_RDWR | O_CLOEXEC);
	if (mover < 0)
		die("open " ROXE_MOVER_DEV " (is roxe_dmabuf_mover.ko loaded?)");
	peek_buf = malloc(BUF_LEN);
	image = malloc(BUF_LEN);
	if (!peek_buf || !image)
		die("allocate");

	exporter_checks();

	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("open the RDMA device");
	pd = ibv_alloc_pd(ctx);
	cqa = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	cqb = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	if (!pd || !cqa || !cqb)
		die("PD and CQs");
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		die("query GID");
	src_mr = plain_mr(pd, &src);
	dst_mr = plain_mr(pd, &dst);
	qpa = make_qp(pd, cqa);
	qpb = make_qp(pd, cqb);
	srand48(time(NULL) ^ getpid());
	psna = lrand48() & 0xffffff;
	psnb = lrand48() & 0xffffff;
	connect_qp(qpa, qpb->qp_num, psna, psnb, &gid, gid_index);
	connect_qp(qpb, qpa->qp_num, psnb, psna, &gid, gid_index);

	/* a. Registered, not pinned. */
	dfd = mv_create(BUF_LEN);
	if (dfd < 0)
		die("CREATE a 1 MiB mover buffer");
	mr = ibv_reg_dmabuf_mr(pd, 0, BUF_LEN, IOVA, dfd, access);
	if (!mr)
		die("ibv_reg_dmabuf_mr over the whole mover buffer");
	report(1, "1 MiB mover buffer registered whole with ibv_reg_dmabuf_mr");
	s = mv_stats(dfd);
	printf("     after registration: %s\n", stats_str(&s));
	can_move = !s.pins;
	if (s.pins) {
		e = mv_move(dfd);
		report(0, "roxe pinned the buffer: no re-validation (pins=%llu, MOVE: %s)",
		       (unsigned long long)s.pins, e ? strerror(e) : "succeeded?");
	} else {
		report(1, "roxe registered the buffer without pinning it");
	}

	/* b. An RDMA WRITE lands in the buffer. */
	fill(src, BUF_LEN, 1);
	post(qpa, IBV_WR_RDMA_WRITE, (uintptr_t)src, BUF_LEN, src_mr->lkey, IOVA, mr->rkey);
	qp_ok &= expect_ok(cqa, "RDMA WRITE of 1 MiB into the dma-buf MR");
	check_peek("PEEK: the buffer holds the written bytes (pattern 1)", dfd, 1);
	fill(image, BUF_LEN, 1);

	/* c. The buffer moves. */
	if (can_move) {
		e = mv_move(dfd);
		s = mv_stats(dfd);
		report(!e, "MOVE of the registered buffer: %s (%s)",
		       e ? strerror(e) : "succeeded", stats_str(&s));
		report(s.moves == 1 && !s.live_vmaps,
		       "right after the move: moves=1 and live_vmaps=0 (roxe dropped its mapping)");
	} else {
		skip("c: MOVE of the registered buffer (pinned)");
	}

	/* d. An RDMA READ reads the moved bytes through a new mapping. */
	s0 = mv_stats(dfd);
	memset(dst, 0, BUF_LEN);
	post(qpa, IBV_WR_RDMA_READ, (uintptr_t)dst, BUF_LEN, dst_mr->lkey, IOVA, mr->rkey);
	qp_ok &= expect_ok(cqa, "RDMA READ of the whole dma-buf MR (after the move)");
	check_pattern("the read bytes are pattern 1 (kept across the move)", dst, BUF_LEN, 1);
	if (can_move) {
		s = mv_stats(dfd);
		report(s.vmap_calls > s0.vmap_calls, "roxe mapped the buffer again (vmap calls %llu -> %llu)",
		       (unsigned long long)s0.vmap_calls, (unsigned long long)s.vmap_calls);
	} else {
		skip("d: roxe maps the buffer again (it never moved)");
	}

	/* e. An RDMA WRITE lands in the new pages. */
	fill(src, BUF_LEN, 2);
	post(qpa, IBV_WR_RDMA_WRITE, (uintptr_t)src, BUF_LEN, src_mr->lkey, IOVA, mr->rkey);
	qp_ok &= expect_ok(cqa, "RDMA WRITE of 1 MiB (pattern 2), after the move");
	check_peek("PEEK: the buffer (its new pages) holds pattern 2", dfd, 2);

	/* f. After another move, a SEND from the buffer (local read path). */
	fill(image, BUF_LEN, 3);
	mv_io(dfd, ROXE_MOVER_POKE, 0, image, BUF_LEN);
	if (can_move) {
		e = mv_move(dfd);
		report(!e, "MOVE before the SEND: %s", e ? strerror(e) : "succeeded");
	} else {
		skip("f: MOVE before the SEND (pinned)");
	}
	s0 = mv_stats(dfd);
	memset(dst, 0, BUF_LEN);
	post_recv(qpb, (uintptr_t)dst, BUF_LEN, dst_mr->lkey);
	post(qpa, IBV_WR_SEND, IOVA, BUF_LEN, mr->lkey, 0, 0);
	qp_ok &= expect_ok(cqa, "SEND of 1 MiB from the dma-buf MR");
	{
		const char *why = wc_error(cqb, &wc);

		if (!why && wc.byte_len != BUF_LEN)
			why = "wrong byte_len";
		report(!why, "the receive in an ordinary MR completes with 1 MiB%s%s",
		       why ? ": " : "", why ? why : "");
		qp_ok &= !why;
	}
	check_pattern("the received bytes are pattern 3 (POKEd before the move)", dst, BUF_LEN, 3);
	if (can_move) {
		s = mv_stats(dfd);
		report(s.vmap_calls > s0.vmap_calls,
		       "roxe mapped the buffer again for the SEND (vmap calls %llu -> %llu)",
		       (unsigned long long)s0.vmap_calls, (unsigned long long)s.vmap_calls);
	} else {
		skip("f: roxe maps the buffer again for the SEND (it never moved)");
	}

	/* g. Moves at random moments under write and read-back traffic. */
	if (can_move && qp_ok) {
		struct stress st = { .fd = dfd };
		int round, bad_round = -1, wrong = 0, want_moves;
		const char *why = NULL;
		pthread_t th;

		s0 = mv_stats(dfd);
		atomic_store(&st.round_us, 1000);
		if (pthread_create(&th, NULL, mover_thread, &st))
			die("start the mover thread");
		/* At least STRESS_ROUNDS, and on until the mover is done. */
		for (round = 0; round < STRESS_ROUNDS ||
				(!atomic_load(&st.done) && round < 20 * STRESS_ROUNDS); round++) {
			unsigned int slot = (round * 7) % SLOTS;
			uint64_t off = (uint64_t)slot * SLOT_LEN;
			uint32_t seed = 1000 + round;
			long long t0 = now_us();

			fill(src + off, SLOT_LEN, seed);
			post(qpa, IBV_WR_RDMA_WRITE, (uintptr_t)(src + off), SLOT_LEN, src_mr->lkey,
			     IOVA + off, mr->rkey);
			why = wc_error(cqa, &wc);
			if (why) {
				bad_round = round;
				break;
			}
			memcpy(image + off, src + off, SLOT_LEN);
			memset(dst + off, 0, SLOT_LEN);
			post(qpa, IBV_WR_RDMA_READ, (uintptr_t)(dst + off), SLOT_LEN, dst_mr->lkey,
			     IOVA + off, mr->rkey);
			why = wc_error(cqa, &wc);
			if (why) {
				bad_round = round;
				break;
			}
			if (mismatch(dst + off, SLOT_LEN, seed) >= 0 && !wrong++)
				printf("     round %d: the read-back of slot %u is not its write\n",
				       round, slot);
			atomic_store(&st.round_us, (int)(now_us() - t0));
			atomic_store(&st.rounds, round + 1);
		}
		atomic_store(&st.stop, 1);
		pthread_join(th, NULL);
		s = mv_stats(dfd);
		printf("     stress: %d rounds, %d moves, last round %d us; %s\n", round, st.moves,
		       atomic_load(&st.round_us), stats_str(&s));
		if (why) {
			report(0, "stress: round %d: %s", bad_round, why);
			qp_ok = 0;
		} else {
			report(1, "stress: %d rounds of 64 KiB RDMA WRITE and READ, every completion succeeded",
			       round);
		}
		report(!wrong, "stress: every read-back equals the write before it (%d did not)", wrong);
		want_moves = why ? st.moves : STRESS_MOVES;
		report(!st.errors && st.moves == want_moves,
		       "stress: %d MOVEs during the traffic, all succeeded (%d refused%s%s)",
		       st.moves, st.errors, st.errors ? ", first: " : "",
		       st.errors ? strerror(st.first_error) : "");
		report(s.moves == s0.moves + (unsigned int)st.moves,
		       "stress: STATS counted the moves (%llu -> %llu)",
		       (unsigned long long)s0.moves, (unsigned long long)s.moves);
		mv_io(dfd, ROXE_MOVER_PEEK, 0, peek_buf, BUF_LEN);
		wrong = 0;
		for (unsigned int i = 0; i < SLOTS; i++)
			if (memcmp(peek_buf + i * SLOT_LEN, image + i * SLOT_LEN, SLOT_LEN))
				wrong++;
		report(!wrong, "stress: PEEK shows every slot's last pattern (%d slots wrong)", wrong);
	} else {
		skip(can_move ? "g: stress (the QP failed before)" : "g: stress (pinned)");
	}

	/* h. Late copies: roxe must wait for the exporter's fence. */
	if (can_move && qp_ok) {
		int bad_read = 0, bad_peek = 0, refused = 0, first_err = 0;
		long long fastest = -1;
		const char *why = NULL;

		for (int r = 0; r < LATE_ROUNDS && !why; r++) {
			unsigned int slot = (r * 5) % SLOTS;
			uint64_t off = (uint64_t)slot * SLOT_LEN;
			uint32_t seed = 5000 + 2 * r;
			long long t0;

			fill(src + off, SLOT_LEN, seed);
			post(qpa, IBV_WR_RDMA_WRITE, (uintptr_t)(src + off), SLOT_LEN, src_mr->lkey,
			     IOVA + off, mr->rkey);
			why = wc_error(cqa, &wc);
			if (why)
				break;
			e = mv_move_flags(dfd, ROXE_MOVER_LATE_COPY);
			t0 = now_us();
			if (e && !refused++)
				first_err = e;
			memset(dst + off, 0, SLOT_LEN);
			post(qpa, IBV_WR_RDMA_READ, (uintptr_t)(dst + off), SLOT_LEN, dst_mr->lkey,
			     IOVA + off, mr->rkey);
			why = wc_error(cqa, &wc);
			if (why)
				break;
			if (fastest < 0 || now_us() - t0 < fastest)
				fastest = now_us() - t0;
			if (mismatch(dst + off, SLOT_LEN, seed) >= 0 && !bad_read++)
				printf("     late round %d: the READ after the move is not the write\n", r);
			e = mv_move_flags(dfd, ROXE_MOVER_LATE_COPY);
			if (e && !refused++)
				first_err = e;
			fill(src + off, SLOT_LEN, seed + 1);
			post(qpa, IBV_WR_RDMA_WRITE, (uintptr_t)(src + off), SLOT_LEN, src_mr->lkey,
			     IOVA + off, mr->rkey);
			why = wc_error(cqa, &wc);
			if (why)
				break;
			memcpy(image + off, src + off, SLOT_LEN);
			/* PEEK waits for the copy: a WRITE that did not wait is overwritten. */
			mv_io(dfd, ROXE_MOVER_PEEK, off, peek_buf, SLOT_LEN);
			if (mismatch(peek_buf, SLOT_LEN, seed + 1) >= 0 && !bad_peek++)
				printf("     late round %d: the WRITE after the move was overwritten\n", r);
		}
		report(!why, "late copies: %d rounds of WRITE, late MOVE, READ, late MOVE, WRITE, every "
		       "completion succeeded%s%s", LATE_ROUNDS, why ? ": " : "", why ? why : "");
		qp_ok &= !why;
		report(!refused, "late copies: all %d MOVEs succeeded (%d refused%s%s)", 2 * LATE_ROUNDS,
		       refused, refused ? ", first: " : "", refused ? strerror(first_err) : "");
		report(!why && !bad_read && fastest >= (ROXE_MOVER_LATE_MS - 5) * 1000ll,
		       "late copies: every READ after a move read the bytes, not the new pages' zeros "
		       "(%d wrong), and none completed before the copy (fastest %lld us after the "
		       "MOVE; the copy comes %d ms after)", bad_read, fastest, ROXE_MOVER_LATE_MS);
		report(!why && !bad_peek,
		       "late copies: no WRITE after a move was overwritten by the copy (%d were)",
		       bad_peek);
	} else {
		skip(can_move ? "h: late copies (the QP failed before)" : "h: late copies (pinned)");
	}

	/* i. Deregistration lets go of everything. */
	ibv_destroy_qp(qpa);
	ibv_destroy_qp(qpb);
	e = ibv_dereg_mr(mr) ? errno : 0;
	report(!e, "deregister the dma-buf MR%s%s", e ? ": " : "", e ? strerror(e) : "");
	s = mv_stats(dfd);
	report(!s.live_vmaps && !s.pins && s.vmap_calls == s.vunmap_calls,
	       "after deregistration: no vmap, no pin (%s)", stats_str(&s));
	e = mv_move(dfd);
	report(!e, "the deregistered buffer moves: %s", e ? strerror(e) : "MOVE succeeded");
	if (qp_ok) {
		mv_io(dfd, ROXE_MOVER_PEEK, 0, peek_buf, BUF_LEN);
		report(!memcmp(peek_buf, image, BUF_LEN), "and keeps its bytes (the last writes)");
	} else {
		skip("i: the buffer's last bytes (a write failed: unknown)");
	}
	/* j. Device memory: pinned to system memory, or refused. */
	{
		int vfd = mv_create_flags(BUF_LEN, ROXE_MOVER_VRAM);
		int ifd = mv_create_flags(BUF_LEN, ROXE_MOVER_IOMEM);
		struct ibv_mr *vmr, *imr;

		if (vfd < 0 || ifd < 0)
			die("CREATE VRAM and IOMEM buffers");
		qpa = make_qp(pd, cqa);
		qpb = make_qp(pd, cqb);
		psna = lrand48() & 0xffffff;
		psnb = lrand48() & 0xffffff;
		connect_qp(qpa, qpb->qp_num, psna, psnb, &gid, gid_index);
		connect_qp(qpb, qpa->qp_num, psnb, psna, &gid, gid_index);
		vmr = ibv_reg_dmabuf_mr(pd, 0, BUF_LEN, IOVA, vfd, access);
		e = vmr ? 0 : errno;
		s = mv_stats(vfd);
		report(vmr && s.pins == 1 && s.live_vmaps == 1,
		       "VRAM buffer (I/O memory until pinned): registered%s%s, pinned by roxe to "
		       "reach system memory (%s)", e ? ": " : "", e ? strerror(e) : "", stats_str(&s));
		if (vmr) {
			const char *why;

			e = mv_move(vfd);
			report(e == EBUSY, "VRAM buffer: MOVE refused while roxe holds its pin (%s)",
			       e ? strerror(e) : "it moved");
			fill(src, BUF_LEN, 7);
			post(qpa, IBV_WR_RDMA_WRITE, (uintptr_t)src, BUF_LEN, src_mr->lkey, IOVA,
			     vmr->rkey);
			why = wc_error(cqa, &wc);
			memset(dst, 0, BUF_LEN);
			if (!why) {
				post(qpa, IBV_WR_RDMA_READ, (uintptr_t)dst, BUF_LEN, dst_mr->lkey, IOVA,
				     vmr->rkey);
				why = wc_error(cqa, &wc);
			}
			mv_io(vfd, ROXE_MOVER_PEEK, 0, peek_buf, BUF_LEN);
			report(!why && mismatch(dst, BUF_LEN, 7) < 0 && mismatch(peek_buf, BUF_LEN, 7) < 0,
			       "VRAM buffer: a 1 MiB WRITE lands (PEEK) and READs back%s%s",
			       why ? ": " : "", why ? why : "");
			e = ibv_dereg_mr(vmr) ? errno : 0;
			s = mv_stats(vfd);
			report(!e && !s.pins && !s.live_vmaps,
			       "VRAM buffer: deregistration lets go of the pin and the mapping (%s)",
			       stats_str(&s));
		}
		imr = ibv_reg_dmabuf_mr(pd, 0, BUF_LEN, IOVA, ifd, access);
		e = imr ? 0 : errno;
		s = mv_stats(ifd);
		report(!imr && e == EOPNOTSUPP && !s.pins && !s.live_vmaps && s.pin_calls == 1,
		       "IOMEM buffer (I/O memory for good): registration refused (%s), roxe tried "
		       "the pin and let go of it, nothing mapped (%s)",
		       e ? strerror(e) : "registered", stats_str(&s));
		if (imr)
			ibv_dereg_mr(imr);
		ibv_destroy_qp(qpa);
		ibv_destroy_qp(qpb);
		close(vfd);
		close(ifd);
	}

	ibv_dereg_mr(src_mr);
	ibv_dereg_mr(dst_mr);
	ibv_destroy_cq(cqa);
	ibv_destroy_cq(cqb);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	close(dfd);
	close(mover);
	printf("dmabuf-move: %d ok, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
