// SPDX-License-Identifier: GPL-2.0
/*
 * The MPI check of issue 18: point-to-point around the ring, broadcast,
 * allreduce, alltoall and one-sided put and get across every rank, each
 * result checked, each operation timed. One line per operation from rank 0:
 *
 *   <op> ok|FAILED <bytes per rank> <microseconds per call> [detail]
 *
 * and a last line "mpi: N operations, M failed"; the exit status is 1 if
 * any failed on any rank.
 *
 * usage: collectives [ROUNDS]   (default 20 calls of each, after 2 warm-up)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, rounds = 20, failed_ops, ops;

/* The value rank r puts at index i of a buffer in round k. */
static uint64_t val(int r, size_t i, int k)
{
	return ((uint64_t)r << 40) ^ ((uint64_t)i * 2654435761u) ^ (uint64_t)k;
}

/* Every rank's verdict, reduced to rank 0, which prints the line. */
static void report(const char *op, size_t bytes, double secs, int bad,
		   const char *detail)
{
	int any = 0;

	MPI_Reduce(&bad, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
	ops++;
	if (any)
		failed_ops++;
	if (rank == 0)
		printf("%-10s %-6s %8zu B %10.1f us%s%s\n", op, any ? "FAILED" : "ok",
		       bytes, secs * 1e6 / rounds, detail ? "  " : "",
		       detail ? detail : "");
	fflush(stdout);
}

static void ring(size_t n)
{
	uint64_t *out = malloc(n * 8), *in = malloc(n * 8);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	int bad = 0;
	double t = 0;

	for (int k = -2; k < rounds; k++) {
		for (size_t i = 0; i < n; i++)
			out[i] = val(rank, i, k);
		memset(in, 0, n * 8);
		double t0 = MPI_Wtime();

		MPI_Sendrecv(out, n, MPI_UINT64_T, next, 1, in, n, MPI_UINT64_T,
			     prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (k >= 0)
			t += MPI_Wtime() - t0;
		for (size_t i = 0; i < n; i++)
			if (in[i] != val(prev, i, k))
				bad = 1;
	}
	report("sendrecv", n * 8, t, bad, NULL);
	free(out);
	free(in);
}

static void bcast(size_t n)
{
	uint64_t *buf = malloc(n * 8);
	int bad = 0;
	double t = 0;

	for (int k = -2; k < rounds; k++) {
		int root = (k + 2) % size;

		for (size_t i = 0; i < n; i++)
			buf[i] = rank == root ? val(root, i, k) : 0;
		double t0 = MPI_Wtime();

		MPI_Bcast(buf, n, MPI_UINT64_T, root, MPI_COMM_WORLD);
		if (k >= 0)
			t += MPI_Wtime() - t0;
		for (size_t i = 0; i < n; i++)
			if (buf[i] != val(root, i, k))
				bad = 1;
	}
	report("bcast", n * 8, t, bad, NULL);
	free(buf);
}

static void allreduce(size_t n)
{
	int64_t *in = malloc(n * 8), *out = malloc(n * 8);
	int bad = 0;
	double t = 0;
	char detail[96] = "";

	for (int k = -2; k < rounds; k++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (int64_t)(rank + 1) * (int64_t)(i + k + 3);
		double t0 = MPI_Wtime();

		MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		if (k >= 0)
			t += MPI_Wtime() - t0;
		/* Sum over ranks of (r + 1) * c is c * size * (size + 1) / 2. */
		for (size_t i = 0; i < n; i++)
			if (out[i] != (int64_t)(i + k + 3) * size * (size + 1) / 2)
				bad = 1;
		if (k == rounds - 1)
			snprintf(detail, sizeof(detail), "sum[0] = %lld (want %lld)",
				 (long long)out[0],
				 (long long)(k + 3) * size * (size + 1) / 2);
	}
	report("allreduce", n * 8, t, bad, detail);
	free(in);
	free(out);
}

static void alltoall(size_t n)
{
	uint64_t *out = malloc(n * 8 * size), *in = malloc(n * 8 * size);
	int bad = 0;
	double t = 0;

	for (int k = -2; k < rounds; k++) {
		/* Block d goes to rank d: it carries (rank, d). */
		for (int d = 0; d < size; d++)
			for (size_t i = 0; i < n; i++)
				out[d * n + i] = val(rank, i + d * 7919, k);
		memset(in, 0, n * 8 * size);
		double t0 = MPI_Wtime();

		MPI_Alltoall(out, n, MPI_UINT64_T, in, n, MPI_UINT64_T,
			     MPI_COMM_WORLD);
		if (k >= 0)
			t += MPI_Wtime() - t0;
		for (int s = 0; s < size; s++)
			for (size_t i = 0; i < n; i++)
				if (in[s * n + i] != val(s, i + rank * 7919, k))
					bad = 1;
	}
	report("alltoall", n * 8, t, bad, NULL);
	free(out);
	free(in);
}

/*
 * One-sided: each rank puts a buffer into the window of the next rank,
 * then gets it back from there, fenced on both sides (osc ucx: UCX's RDMA
 * write and read). The window must hold what the previous rank put, and
 * the get must return what this rank put.
 */
static void putget(size_t n)
{
	uint64_t *out = malloc(n * 8), *in = malloc(n * 8), *win_buf;
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	int bad = 0;
	double t = 0;
	MPI_Win win;

	MPI_Win_allocate(n * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win_buf, &win);
	for (int k = -2; k < rounds; k++) {
		for (size_t i = 0; i < n; i++)
			out[i] = val(rank, i + 31, k);
		memset(in, 0, n * 8);
		MPI_Win_fence(0, win);
		double t0 = MPI_Wtime();

		MPI_Put(out, n, MPI_UINT64_T, next, 0, n, MPI_UINT64_T, win);
		MPI_Win_fence(0, win);
		MPI_Get(in, n, MPI_UINT64_T, next, 0, n, MPI_UINT64_T, win);
		MPI_Win_fence(0, win);
		if (k >= 0)
			t += MPI_Wtime() - t0;
		for (size_t i = 0; i < n; i++)
			if (win_buf[i] != val(prev, i + 31, k) || in[i] != out[i])
				bad = 1;
	}
	MPI_Win_free(&win);
	report("putget", n * 8, t, bad, NULL);
	free(out);
	free(in);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 1024, 65536 }; /* 8-byte words */
	int any = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 1)
		rounds = atoi(argv[1]) > 0 ? atoi(argv[1]) : rounds;
	if (rank == 0) {
		char name[MPI_MAX_PROCESSOR_NAME];
		int len;

		MPI_Get_processor_name(name, &len);
		printf("mpi: %d ranks, %d calls of each operation\n", size, rounds);
	}
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		ring(sizes[s]);
		bcast(sizes[s]);
		allreduce(sizes[s]);
		alltoall(sizes[s]);
		putget(sizes[s]);
	}
	if (rank == 0)
		printf("mpi: %d operations, %d failed\n", ops, failed_ops);
	any = failed_ops != 0;
	MPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return any;
}
