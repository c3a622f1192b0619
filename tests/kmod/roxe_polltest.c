// SPDX-License-Identifier: GPL-2.0
/*
 * roxe_polltest: a kernel verbs consumer whose completion handler polls its
 * CQ, re-arms it and posts to the same QP from inside the handler (issue 13,
 * finding 8). See tests/kmod/README.md.
 *
 * The run happens in the client's add callback, for the device named by
 * dev=; module init fails unless it passed, so `insmod` reports the result.
 */
#include <linux/module.h>
#include <linux/completion.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>

static char *dev = "roxe0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the RDMA device to test");
static unsigned int rounds = 300;
module_param(rounds, uint, 0444);
MODULE_PARM_DESC(rounds, "round trips to make");

#define NRECV 8
#define MSG_LEN 64
/* A UD receive starts with room for the GRH. */
#define SLOT_LEN (40 + MSG_LEN)
#define QKEY 0x1234567
#define SEND_ID (~0ULL)
#define TIMEOUT_MS 30000

struct pt {
	struct ib_device *ibdev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_ah *ah;
	u8 *buf;		/* NRECV receive slots, then the send buffer */
	u32 qpn;
	unsigned int received;
	unsigned int handler_calls;
	int error;
	bool finished;
	struct completion done;
};

static int result = -ENODEV;

static int post_recv(struct pt *t, unsigned int slot)
{
	struct ib_sge sge = {
		.addr = (u64)(uintptr_t)(t->buf + slot * SLOT_LEN),
		.length = SLOT_LEN,
		.lkey = t->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(t->qp, &wr, NULL);
}

static int post_send(struct pt *t)
{
	u8 *msg = t->buf + NRECV * SLOT_LEN;
	struct ib_sge sge = {
		.addr = (u64)(uintptr_t)msg,
		.length = MSG_LEN,
		.lkey = t->pd->local_dma_lkey,
	};
	struct ib_ud_wr wr = {
		.wr = {
			.wr_id = SEND_ID,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IB_WR_SEND,
			.send_flags = IB_SEND_SIGNALED,
		},
		.ah = t->ah,
		.remote_qpn = t->qpn,
		.remote_qkey = QKEY,
	};

	memset(msg, t->received & 0xff, MSG_LEN);
	return ib_post_send(t->qp, &wr.wr, NULL);
}

static void finish(struct pt *t, int error)
{
	if (t->finished)
		return;
	t->error = error;
	t->finished = true;
	complete(&t->done);
}

static void handle(struct pt *t, const struct ib_wc *wc)
{
	int ret;

	if (t->finished)
		return;
	if (wc->status != IB_WC_SUCCESS) {
		pr_err("roxe_polltest: completion %llu: status %d\n", wc->wr_id, wc->status);
		finish(t, -EIO);
		return;
	}
	if (wc->wr_id == SEND_ID)
		return;
	if (wc->wr_id >= NRECV || wc->byte_len != SLOT_LEN ||
	    t->buf[wc->wr_id * SLOT_LEN + 40] != (t->received & 0xff)) {
		pr_err("roxe_polltest: receive %u: wrong slot, length %u or data\n",
		       t->received, wc->byte_len);
		finish(t, -EBADMSG);
		return;
	}
	t->received++;
	/* Both posts happen in the completion handler, on the handler's QP. */
	ret = post_recv(t, wc->wr_id);
	if (!ret && t->received < rounds)
		ret = post_send(t);
	if (ret)
		finish(t, ret);
	else if (t->received >= rounds)
		finish(t, 0);
}

static void comp_handler(struct ib_cq *cq, void *ctx)
{
	struct pt *t = ctx;
	struct ib_wc wc[4];
	int n, i;

	t->handler_calls++;
	do {
		while ((n = ib_poll_cq(cq, ARRAY_SIZE(wc), wc)) > 0)
			for (i = 0; i < n; i++)
				handle(t, &wc[i]);
		if (t->finished)
			return;
	} while (ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS) > 0);
}

static int find_gid(struct pt *t, struct rdma_ah_attr *ah)
{
	const struct ib_gid_attr *g;
	unsigned int i;

	for (i = 0; i < 16; i++) {
		g = rdma_get_gid_attr(t->ibdev, 1, i);
		if (IS_ERR(g))
			continue;
		if (g->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP) {
			union ib_gid gid = g->gid;

			memset(ah, 0, sizeof(*ah));
			ah->type = RDMA_AH_ATTR_TYPE_ROCE;
			rdma_ah_set_port_num(ah, 1);
			rdma_ah_set_grh(ah, &gid, 0, i, 64, 0);
			rdma_put_gid_attr(g);
			return 0;
		}
		rdma_put_gid_attr(g);
	}
	return -ENOENT;
}

static int to_rts(struct pt *t)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qkey = QKEY,
	};
	int ret;

	ret = ib_modify_qp(t->qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	if (ret)
		return ret;
	a.qp_state = IB_QPS_RTR;
	ret = ib_modify_qp(t->qp, &a, IB_QP_STATE);
	if (ret)
		return ret;
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 0;
	return ib_modify_qp(t->qp, &a, IB_QP_STATE | IB_QP_SQ_PSN);
}

static int run(struct pt *t)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 64 };
	struct ib_qp_init_attr qp_attr = {};
	struct rdma_ah_attr ah_attr;
	unsigned int i;
	int ret;

	init_completion(&t->done);
	t->buf = kzalloc(NRECV * SLOT_LEN + MSG_LEN, GFP_KERNEL);
	if (!t->buf)
		return -ENOMEM;
	t->pd = ib_alloc_pd(t->ibdev, 0);
	if (IS_ERR(t->pd)) {
		ret = PTR_ERR(t->pd);
		t->pd = NULL;
		return ret;
	}
	/* Our own completion handler, called by the driver. */
	t->cq = __ib_create_cq(t->ibdev, comp_handler, NULL, t, &cq_attr, KBUILD_MODNAME);
	if (IS_ERR(t->cq)) {
		ret = PTR_ERR(t->cq);
		t->cq = NULL;
		return ret;
	}
	qp_attr.send_cq = t->cq;
	qp_attr.recv_cq = t->cq;
	qp_attr.qp_type = IB_QPT_UD;
	qp_attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	qp_attr.cap.max_send_wr = 16;
	qp_attr.cap.max_recv_wr = NRECV;
	qp_attr.cap.max_send_sge = 1;
	qp_attr.cap.max_recv_sge = 1;
	t->qp = ib_create_qp(t->pd, &qp_attr);
	if (IS_ERR(t->qp)) {
		ret = PTR_ERR(t->qp);
		t->qp = NULL;
		return ret;
	}
	t->qpn = t->qp->qp_num;
	ret = find_gid(t, &ah_attr);
	if (ret)
		return ret;
	t->ah = rdma_create_ah(t->pd, &ah_attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(t->ah)) {
		ret = PTR_ERR(t->ah);
		t->ah = NULL;
		return ret;
	}
	ret = to_rts(t);
	if (ret)
		return ret;
	for (i = 0; i < NRECV; i++) {
		ret = post_recv(t, i);
		if (ret)
			return ret;
	}
	ret = ib_req_notify_cq(t->cq, IB_CQ_NEXT_COMP);
	if (ret)
		return ret;
	/* The first send; the handler posts every one after it. */
	ret = post_send(t);
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&t->done, msecs_to_jiffies(TIMEOUT_MS))) {
		pr_err("roxe_polltest: no progress after %u of %u round trips\n", t->received, rounds);
		return -ETIMEDOUT;
	}
	return t->error;
}

static void teardown(struct pt *t)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_ERR };

	if (t->qp) {
		/* Flushes anything posted; the handler sees `finished` and stops. */
		t->finished = true;
		ib_modify_qp(t->qp, &a, IB_QP_STATE);
		ib_destroy_qp(t->qp);
	}
	if (t->ah)
		rdma_destroy_ah(t->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (t->cq)
		ib_destroy_cq(t->cq);
	if (t->pd)
		ib_dealloc_pd(t->pd);
	kfree(t->buf);
}

static int pt_add(struct ib_device *ibdev)
{
	struct pt *t;

	if (strcmp(dev_name(&ibdev->dev), dev))
		return -EOPNOTSUPP;
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	t->ibdev = ibdev;
	result = run(t);
	if (result)
		pr_err("roxe_polltest: FAIL on %s: error %d after %u round trips\n", dev,
		       result, t->received);
	else
		pr_info("roxe_polltest: PASS %u round trips on %s, %u handler calls\n",
			t->received, dev, t->handler_calls);
	teardown(t);
	kfree(t);
	return 0;
}

static void pt_remove(struct ib_device *ibdev, void *data)
{
}

static struct ib_client pt_client = {
	.name = "roxe_polltest",
	.add = pt_add,
	.remove = pt_remove,
};

static int __init pt_init(void)
{
	int ret = ib_register_client(&pt_client);

	if (ret)
		return ret;
	if (result) {
		if (result == -ENODEV)
			pr_err("roxe_polltest: FAIL: no device %s\n", dev);
		ib_unregister_client(&pt_client);
		return result < 0 ? result : -EIO;
	}
	return 0;
}

static void __exit pt_exit(void)
{
	ib_unregister_client(&pt_client);
}

module_init(pt_init);
module_exit(pt_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("roxe test: a completion handler that polls and posts");
