/* Strong-scaling MPI benchmark for node-count advice and APMT (benchmarks/scaling).
 *
 * 2-D Jacobi relaxation on an N x N grid split into row blocks: per iteration each rank
 * updates its block (compute, ~1/P), exchanges halo rows with MPI_Sendrecv (p2p) and sums the
 * residual with MPI_Allreduce (collective, ~log P). Fixed total N => strong scaling.
 *
 * Optional emulated work: with STENCIL_EMULATED_WORK_S=W in the environment each rank also
 * sleeps W/(ITERATIONS*P) per iteration, i.e. W seconds of perfectly divisible work in total.
 * This stands in for a compute kernel that a 2-core machine cannot scale past 2 processes;
 * halos, reductions, process start-up and oversubscription stay real.
 *
 * usage: mpi_stencil N ITERATIONS [PROFILE.csv]
 * stdout: "wall_s=<max over ranks> processes=<P> n=<N> iterations=<I> residual=<r>"
 * PROFILE.csv (optional, rank 0 writes): call,count,bytes,time_s totals over all ranks, timed
 * with MPI_Wtime around each call (an mpiP-like aggregate), followed by "# function,seconds"
 * lines with per-phase CPU time (stencil, copy) summed over ranks.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s N ITERATIONS [PROFILE.csv]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long n = atol(argv[1]);
    int iterations = atoi(argv[2]);
    long rows = n / size + (rank < n % size ? 1 : 0);
    double *a = calloc((size_t)(rows + 2) * n, sizeof(double));
    double *b = calloc((size_t)(rows + 2) * n, sizeof(double));
    if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 3);
    long first = rank * (n / size) + (rank < n % size ? rank : n % size);  /* global row of i=1 */
    for (long i = 1; i <= rows; i++)
        for (long j = 0; j < n; j++) a[i * n + j] = (double)(((first + i) * 13 + j) % 100);
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    const char *emulated = getenv("STENCIL_EMULATED_WORK_S");
    double sleep_s = emulated ? atof(emulated) / ((double)iterations * size) : 0.0;
    struct timespec nap = {(time_t)sleep_s, (long)((sleep_s - (time_t)sleep_s) * 1e9)};
    double t_emulated = 0;
    double t_sendrecv = 0, t_allreduce = 0, t_stencil = 0, t_copy = 0, residual = 0;
    long n_sendrecv = 0, n_allreduce = 0, bytes_sendrecv = 0, bytes_allreduce = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 0; it < iterations; it++) {
        double t0 = MPI_Wtime();
        MPI_Sendrecv(&a[1 * n], (int)n, MPI_DOUBLE, up, 0, &a[(rows + 1) * n], (int)n, MPI_DOUBLE, down, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[rows * n], (int)n, MPI_DOUBLE, down, 1, &a[0], (int)n, MPI_DOUBLE, up, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double t1 = MPI_Wtime();
        t_sendrecv += t1 - t0;
        n_sendrecv += 2;
        bytes_sendrecv += (up != MPI_PROC_NULL ? n * 8 : 0) + (down != MPI_PROC_NULL ? n * 8 : 0);
        double local = 0;
        for (long i = 1; i <= rows; i++) {
            for (long j = 1; j < n - 1; j++) {
                double v = 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1] + a[i * n + j + 1]);
                double d = v - a[i * n + j];
                local += d * d;
                b[i * n + j] = v;
            }
        }
        double t2 = MPI_Wtime();
        t_stencil += t2 - t1;
        if (sleep_s > 0) {
            nanosleep(&nap, NULL);
            double t2b = MPI_Wtime();
            t_emulated += t2b - t2;
            t2 = t2b;
        }
        memcpy(&a[n], &b[n], (size_t)rows * n * sizeof(double));
        double t3 = MPI_Wtime();
        t_copy += t3 - t2;
        MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        t_allreduce += MPI_Wtime() - t3;
        n_allreduce += 1;
        bytes_allreduce += 8;
    }
    double elapsed = MPI_Wtime() - start, wall;
    MPI_Reduce(&elapsed, &wall, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double mine[5] = {t_sendrecv, t_allreduce, t_stencil, t_copy, t_emulated}, sum[5];
    long counts[4] = {n_sendrecv, n_allreduce, bytes_sendrecv, bytes_allreduce}, csum[4];
    MPI_Reduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(counts, csum, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("wall_s=%.6f processes=%d n=%ld iterations=%d residual=%.6g\n", wall, size, n, iterations, residual);
        if (argc > 3) {
            FILE *f = fopen(argv[3], "w");
            if (!f) MPI_Abort(MPI_COMM_WORLD, 4);
            fprintf(f, "call,count,bytes,time_s\n");
            fprintf(f, "MPI_Sendrecv,%ld,%ld,%.6f\n", csum[0], csum[2], sum[0]);
            fprintf(f, "MPI_Allreduce,%ld,%ld,%.6f\n", csum[1], csum[3], sum[1]);
            fprintf(f, "# function,seconds\n# stencil,%.6f\n# copy,%.6f\n", sum[2], sum[3]);
            if (sleep_s > 0) fprintf(f, "# emulated-work,%.6f\n", sum[4]);
            fclose(f);
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
