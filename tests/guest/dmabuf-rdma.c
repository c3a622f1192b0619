// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * dma-buf memory regions (ibv_reg_dmabuf_mr) on a roxe device, with
 * buffers that vgem exports.
 *
 *   dmabuf-rdma DEV GID_INDEX              server: local checks, then serves
 *   dmabuf-rdma DEV GID_INDEX SERVER_IP    client: local checks, then traffic
 *
 * vgem is a DRM driver with no hardware: its "dumb" buffers are shmem
 * pages, exported as dma-bufs with PRIME_HANDLE_TO_FD. Each side makes one,
 * registers 1 MiB of it from a page offset of 100 bytes, and maps it to
 * check what arrived; then it closes the GEM handle and the descriptor
 * (its mapping keeps the buffer too). Each side also registers a page of
 * a second buffer for remote read and lets go of everything else of it,
 * mapping included: the client's RDMA READ of the server's shows that the
 * MR alone keeps a buffer, with its bytes.
 *
 * Local checks (both sides): a file that is not a dma-buf, a range past
 * the buffer's end, a zero length, and any write right over a buffer
 * exported read-only are refused with their errno; read rights over it are
 * granted.
 *
 * Traffic (one RC QP, client as requester), each checked byte for byte
 * on the side that receives it, with the bytes around the range unchanged:
 * an RDMA WRITE of the whole MR from the client's dma-buf MR into the
 * server's; an RDMA READ of the whole MR back into the client's; a SEND of
 * 64 KiB into a receive posted in the server's dma-buf MR; an RDMA READ of
 * the server's let-go page; a fetch-and-add on the last aligned word of
 * its MR; and last an RDMA WRITE that runs 8 bytes past the end of the
 * server's MR, which must complete with a remote access error and leave
 * the server's memory as it was.
 *
 * Prints PASS:/FAIL: lines; exits 0 only if every check passed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* From the kernel's UAPI (include/uapi/drm), so no DRM headers are needed. */
struct drm_mode_create_dumb {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};
struct drm_prime_handle {
	uint32_t handle, flags;
	int32_t fd;
};
struct drm_gem_close {
	uint32_t handle, pad;
};
#define DRM_IOCTL_GEM_CLOSE _IOW('d', 0x09, struct drm_gem_close)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD _IOWR('d', 0x2d, struct drm_prime_handle)
#define DRM_IOCTL_MODE_CREATE_DUMB _IOWR('d', 0xB2, struct drm_mode_create_dumb)

#define PAGE 4096u
#define MR_LEN (1u << 20)
#define MR_OFF (PAGE + 100)         /* the registration's first byte in the buffer */
#define BUF_LEN (MR_LEN + 3 * PAGE) /* room on both sides of the MR */
#define IOVA_BASE 0x7e0000000000ull
#define IOVA (IOVA_BASE + 100)      /* same offset in its page as MR_OFF */
#define SEND_LEN (64u << 10)
#define PORT 18611

static int failed, passed;

static void pass(const char *what)
{
	printf("PASS: %s\n", what);
	passed++;
}

static void fail(const char *what, const char *why)
{
	printf("FAIL: %s: %s\n", what, why);
	failed++;
}

static void die(const char *what)
{
	printf("FAIL: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int card_fd;

/* The primary node of vgem: the only DRM device the guests have. */
static void open_vgem(void)
{
	char link[PATH_MAX], path[300];
	struct dirent *d;
	DIR *dp = opendir("/sys/class/drm");

	if (!dp)
		die("open /sys/class/drm (is vgem loaded?)");
	card_fd = -1;
	while ((d = readdir(dp))) {
		ssize_t n;

		if (strncmp(d->d_name, "card", 4) || strchr(d->d_name, '-'))
			continue;
		snprintf(path, sizeof(path), "/sys/class/drm/%s/device", d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		if (strcmp(strrchr(link, '/') ?: link, "/vgem"))
			continue;
		snprintf(path, sizeof(path), "/dev/dri/%s", d->d_name);
		card_fd = open(path, O_RDWR | O_CLOEXEC);
		break;
	}
	closedir(dp);
	if (card_fd < 0)
		die("open vgem's card node");
}

struct buf {
	uint32_t handle;
	int fd;       /* read-write dma-buf */
	uint8_t *map; /* the whole buffer */
};

static struct buf new_buf(void)
{
	struct drm_mode_create_dumb c = { .width = PAGE, .bpp = 8, .height = BUF_LEN / PAGE };
	struct drm_prime_handle p = { .flags = O_RDWR | O_CLOEXEC };
	struct buf b;

	if (ioctl(card_fd, DRM_IOCTL_MODE_CREATE_DUMB, &c))
		die("vgem: create a dumb buffer");
	if (c.size < BUF_LEN) {
		errno = ENOSPC;
		die("vgem: buffer size");
	}
	p.handle = c.handle;
	if (ioctl(card_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		die("vgem: export the buffer");
	b.handle = c.handle;
	b.fd = p.fd;
	b.map = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
	if (b.map == MAP_FAILED)
		die("mmap the dma-buf");
	return b;
}

/* Drop everything but the mapping: from here the MR keeps the buffer. */
static void let_go(struct buf *b)
{
	struct drm_gem_close g = { .handle = b->handle };

	if (ioctl(card_fd, DRM_IOCTL_GEM_CLOSE, &g))
		die("vgem: close the GEM handle");
	close(b->fd);
	b->fd = -1;
}

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

/*
 * -1 if p[0..n) is the pattern from its byte `first` on, else the first
 * byte that is not.
 */
static long mismatch(const uint8_t *p, size_t n, uint32_t seed, size_t first)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seed, first + i))
			return (long)i;
	return -1;
}

static void check_at(const char *what, const uint8_t *p, size_t n, uint32_t seed, size_t first)
{
	long at = mismatch(p, n, seed, first);
	char why[80];

	if (at < 0) {
		pass(what);
		return;
	}
	snprintf(why, sizeof(why), "first wrong byte at %ld of %zu", at, n);
	fail(what, why);
}

static void check_range(const char *what, const uint8_t *p, size_t n, uint32_t seed)
{
	check_at(what, p, n, seed, 0);
}

static void expect_errno(const char *what, struct ibv_mr *mr, int want)
{
	char why[120];

	if (!mr && errno == want) {
		pass(what);
		return;
	}
	if (mr) {
		snprintf(why, sizeof(why), "registered (lkey 0x%x), expected %s", mr->lkey,
			 strerror(want));
		ibv_dereg_mr(mr);
	} else {
		snprintf(why, sizeof(why), "errno %d (%s), expected %d (%s)", errno,
			 strerror(errno), want, strerror(want));
	}
	fail(what, why);
}

static void local_checks(struct ibv_pd *pd, struct buf *b)
{
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct drm_mode_create_dumb c = { .width = PAGE, .bpp = 8, .height = 1 };
	struct drm_prime_handle ro = { .flags = O_CLOEXEC };
	int nul = open("/dev/null", O_RDWR);
	struct ibv_mr *mr;

	expect_errno("a file that is not a dma-buf is refused (EINVAL)",
		     ibv_reg_dmabuf_mr(pd, 0, PAGE, 0, nul, rw), EINVAL);
	close(nul);
	expect_errno("a closed descriptor is refused (EBADF)",
		     ibv_reg_dmabuf_mr(pd, 0, PAGE, 0, 1000, rw), EBADF);
	expect_errno("a range past the buffer's end is refused (EINVAL)",
		     ibv_reg_dmabuf_mr(pd, PAGE, BUF_LEN, PAGE, b->fd, rw), EINVAL);
	expect_errno("a zero length is refused (EINVAL)",
		     ibv_reg_dmabuf_mr(pd, 0, 0, 0, b->fd, rw), EINVAL);
	/*
	 * A buffer's dma-buf is one file, made at its first export: every
	 * later export of it shares that file's mode. So the read-only case
	 * needs a buffer of its own, exported read-only from the start.
	 */
	if (ioctl(card_fd, DRM_IOCTL_MODE_CREATE_DUMB, &c))
		die("vgem: create a second dumb buffer");
	ro.handle = c.handle;
	if (ioctl(card_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ro))
		die("vgem: export the buffer read-only");
	expect_errno("local and remote write over a read-only dma-buf are refused (EACCES)",
		     ibv_reg_dmabuf_mr(pd, 0, PAGE, 0, ro.fd, rw), EACCES);
	expect_errno("local write alone over a read-only dma-buf is refused (EACCES)",
		     ibv_reg_dmabuf_mr(pd, 0, PAGE, 0, ro.fd, IBV_ACCESS_LOCAL_WRITE), EACCES);
	mr = ibv_reg_dmabuf_mr(pd, 0, PAGE, 0, ro.fd, IBV_ACCESS_REMOTE_READ);
	if (mr) {
		pass("remote read over a read-only dma-buf is granted");
		ibv_dereg_mr(mr);
	} else {
		fail("remote read over a read-only dma-buf is granted", strerror(errno));
	}
	close(ro.fd);
}

/* What the two sides tell each other. */
struct peer {
	uint32_t qpn, psn, rkey, lone_rkey;
	uint64_t iova;
	uint8_t gid[16];
};

#define LONE_IOVA 0x7f0000000000ull
#define LONE_SEED 5

/*
 * A one-page buffer, filled, registered for remote read, and then let go
 * of entirely (mapping, descriptor, GEM handle): from here only the MR
 * holds it, and the peer reads it back.
 */
static struct ibv_mr *lone_mr(struct ibv_pd *pd)
{
	struct drm_mode_create_dumb c = { .width = PAGE, .bpp = 8, .height = 1 };
	struct drm_prime_handle p = { .flags = O_RDWR | O_CLOEXEC };
	struct drm_gem_close g;
	struct ibv_mr *mr;
	uint8_t *map;

	if (ioctl(card_fd, DRM_IOCTL_MODE_CREATE_DUMB, &c))
		die("vgem: create a one-page buffer");
	p.handle = g.handle = c.handle;
	if (ioctl(card_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		die("vgem: export the one-page buffer");
	map = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0);
	if (map == MAP_FAILED)
		die("mmap the one-page buffer");
	fill(map, PAGE, LONE_SEED);
	mr = ibv_reg_dmabuf_mr(pd, 0, PAGE, LONE_IOVA, p.fd, IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("register the one-page buffer");
	munmap(map, PAGE);
	close(p.fd);
	g.pad = 0;
	if (ioctl(card_fd, DRM_IOCTL_GEM_CLOSE, &g))
		die("vgem: close the one-page buffer's handle");
	return mr;
}

static int tcp(const char *server)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0), c;

	if (s < 0)
		die("socket");
	if (!server) {
		a.sin_addr.s_addr = INADDR_ANY;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (void *)&a, sizeof(a)) || listen(s, 1))
			die("listen");
		c = accept(s, NULL, NULL);
		if (c < 0)
			die("accept");
		close(s);
		return c;
	}
	if (inet_pton(AF_INET, server, &a.sin_addr) != 1) {
		errno = EINVAL;
		die("server address");
	}
	for (int i = 0; i < 600; i++) {
		if (!connect(s, (void *)&a, sizeof(a)))
			return s;
		close(s);
		s = socket(AF_INET, SOCK_STREAM, 0);
		usleep(100000);
	}
	die("connect to the server");
	return -1;
}

static void xfer(int s, void *out, void *in, size_t n)
{
	if (out && write(s, out, n) != (ssize_t)n)
		die("send to peer");
	if (in) {
		size_t got = 0;

		while (got < n) {
			ssize_t r = read(s, (char *)in + got, n - got);

			if (r <= 0) {
				errno = r ? errno : ECONNRESET;
				die("receive from peer");
			}
			got += r;
		}
	}
}

/* One byte each way: both sides reached the same step. */
static void sync_step(int s, uint8_t step)
{
	uint8_t got;

	xfer(s, &step, &got, 1);
	if (got != step) {
		errno = EPROTO;
		die("peers out of step");
	}
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		die("create QP");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("QP to INIT");
	return qp;
}

static void connect_qp(struct ibv_qp *qp, const struct peer *me, const struct peer *them,
		       int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = them->qpn,
		.rq_psn = them->psn, .max_dest_rd_atomic = 4, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .sgid_index = gid_index, .hop_limit = 64 } },
	};

	memcpy(a.ah_attr.grh.dgid.raw, them->gid, 16);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("QP to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS");
}

/* The next completion within 30 s, or a failed check. */
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
		if (t.tv_sec - t0.tv_sec > 30)
			return -1;
		usleep(100);
	}
}

static void expect_wc(struct ibv_cq *cq, const char *what, enum ibv_wc_status want)
{
	struct ibv_wc wc;
	char why[120];

	if (wait_wc(cq, &wc)) {
		fail(what, "no completion within 30 s");
		return;
	}
	if (wc.status == want) {
		pass(what);
		return;
	}
	snprintf(why, sizeof(why), "completion status %d (%s), expected %s", wc.status,
		 ibv_wc_status_str(wc.status), ibv_wc_status_str(want));
	fail(what, why);
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t laddr, uint32_t len,
		 uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		die("post send");
}

int main(int argc, char **argv)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;
	const char *server = argc > 3 ? argv[3] : NULL;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct peer me = { 0 }, them;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr, *lone;
	union ibv_gid gid;
	struct buf b;
	int gid_index, s;
	uint32_t guard;
	uint8_t *reg;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s DEV GID_INDEX [SERVER_IP]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	gid_index = atoi(argv[2]);
	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("open the RDMA device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	if (!pd || !cq)
		die("PD and CQ");
	open_vgem();
	b = new_buf();
	local_checks(pd, &b);

	/* The MR over [MR_OFF, MR_OFF + MR_LEN); guards around it. */
	guard = server ? 11 : 21;
	fill(b.map, BUF_LEN, guard);
	mr = ibv_reg_dmabuf_mr(pd, MR_OFF, MR_LEN, IOVA, b.fd, access);
	if (!mr)
		die("register the dma-buf MR");
	pass("1 MiB of a vgem dma-buf registered, from byte 4196");
	let_go(&b);
	reg = b.map + MR_OFF;
	lone = lone_mr(pd);

	qp = make_qp(pd, cq);
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		die("query GID");
	srand48(time(NULL) ^ getpid());
	me.qpn = qp->qp_num;
	me.psn = lrand48() & 0xffffff;
	me.rkey = mr->rkey;
	me.iova = IOVA;
	me.lone_rkey = lone->rkey;
	memcpy(me.gid, gid.raw, 16);
	s = tcp(server);
	xfer(s, &me, &them, sizeof(me));
	connect_qp(qp, &me, &them, gid_index);
	sync_step(s, 1);

	/*
	 * The steps, in order; each side waits for the other at every
	 * sync_step, so nothing is checked or refilled while the peer's
	 * operation may still touch it.
	 */
	if (server) {
		/* The client: requester of every operation. */
		fill(reg, MR_LEN, 1);
		post(qp, IBV_WR_RDMA_WRITE, IOVA, MR_LEN, mr->lkey, them.iova, them.rkey);
		expect_wc(cq, "RDMA WRITE of 1 MiB from a dma-buf MR into one", IBV_WC_SUCCESS);
		sync_step(s, 2); /* the server checks, then fills pattern 2 */
		sync_step(s, 3);
		fill(reg, MR_LEN, 0);
		post(qp, IBV_WR_RDMA_READ, IOVA, MR_LEN, mr->lkey, them.iova, them.rkey);
		expect_wc(cq, "RDMA READ of 1 MiB from a dma-buf MR into one", IBV_WC_SUCCESS);
		check_range("the read bytes are the server's, byte for byte", reg, MR_LEN, 2);
		check_range("the bytes before the MR are untouched", b.map, MR_OFF, guard);
		fill(reg, SEND_LEN, 3);
		sync_step(s, 4); /* the server posts its receive */
		sync_step(s, 5);
		post(qp, IBV_WR_SEND, IOVA, SEND_LEN, mr->lkey, 0, 0);
		expect_wc(cq, "SEND of 64 KiB from a dma-buf MR", IBV_WC_SUCCESS);
		fill(reg, PAGE, 0);
		post(qp, IBV_WR_RDMA_READ, IOVA, PAGE, mr->lkey, LONE_IOVA, them.lone_rkey);
		expect_wc(cq, "RDMA READ from a dma-buf that only its MR still holds",
			  IBV_WC_SUCCESS);
		check_range("its bytes are the ones written before it was let go", reg, PAGE,
			    LONE_SEED);
		sync_step(s, 6); /* the server checks the receive, notes the word */
		post(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, IOVA + 4, 8, mr->lkey, them.iova + MR_LEN - 12,
		     them.rkey);
		expect_wc(cq, "fetch-and-add on a dma-buf MR, at its last aligned word",
			  IBV_WC_SUCCESS);
		{
			uint64_t old, want;

			memcpy(&old, reg + 4, 8);
			sync_step(s, 7);
			xfer(s, NULL, &want, 8); /* after the server's snapshot */
			if (old == want)
				pass("fetch-and-add returned the value the server held");
			else
				fail("fetch-and-add returned the value the server held", "it differs");
		}
		post(qp, IBV_WR_RDMA_WRITE, IOVA, 16, mr->lkey, them.iova + MR_LEN - 8, them.rkey);
		expect_wc(cq, "an RDMA WRITE 8 bytes past the MR's end fails with a remote access error",
			  IBV_WC_REM_ACCESS_ERR);
		sync_step(s, 8);
	} else {
		/* The server: the client's operations land here. */
		sync_step(s, 2);
		check_range("the written bytes are the client's, byte for byte", reg, MR_LEN, 1);
		check_range("the bytes before the MR are untouched", b.map, MR_OFF, guard);
		check_at("the bytes after the MR are untouched", reg + MR_LEN,
			 BUF_LEN - MR_OFF - MR_LEN, guard, MR_OFF + MR_LEN);
		fill(reg, MR_LEN, 2);
		sync_step(s, 3);
		sync_step(s, 4);
		{
			struct ibv_sge sge = { .addr = IOVA + 4096, .length = SEND_LEN, .lkey = mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;
			struct ibv_wc wc;

			memset(reg + 4096, 0, SEND_LEN);
			if (ibv_post_recv(qp, &wr, &bad))
				die("post receive");
			sync_step(s, 5);
			if (wait_wc(cq, &wc) || wc.status != IBV_WC_SUCCESS || wc.byte_len != SEND_LEN)
				fail("a receive in a dma-buf MR takes 64 KiB", "bad or no completion");
			else
				pass("a receive in a dma-buf MR takes 64 KiB");
			check_range("the received bytes are the client's, byte for byte", reg + 4096,
				    SEND_LEN, 3);
		}
		{
			uint64_t before, after;
			uint8_t tail[16];

			memcpy(&before, reg + MR_LEN - 12, 8);
			sync_step(s, 6);
			sync_step(s, 7); /* the fetch-and-add has completed */
			memcpy(&after, reg + MR_LEN - 12, 8);
			if (after == before + 5)
				pass("the fetch-and-add added 5 in the dma-buf");
			else
				fail("the fetch-and-add added 5 in the dma-buf", "it did not");
			/* Snapshot before the client may send the write past the end. */
			memcpy(tail, reg + MR_LEN - 8, 16);
			xfer(s, &before, NULL, 8);
			sync_step(s, 8);
			if (!memcmp(tail, reg + MR_LEN - 8, 16))
				pass("the refused write changed nothing, in or past the MR");
			else
				fail("the refused write changed nothing, in or past the MR", "bytes changed");
		}
	}
	ibv_destroy_qp(qp);
	if (ibv_dereg_mr(lone))
		fail("deregister the one-page dma-buf MR", strerror(errno));
	if (ibv_dereg_mr(mr))
		fail("deregister the dma-buf MR", strerror(errno));
	else
		pass("deregister the dma-buf MR");
	munmap(b.map, BUF_LEN);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	close(s);
	printf("dmabuf-rdma: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
