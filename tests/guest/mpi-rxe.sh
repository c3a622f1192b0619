# tests/guest/mpi.sh over rxe0 instead of roxe0, for the comparison in
# Documentation/multi-node.md.
MPI_DEV=rxe
. "$ROXE_ROOT/tests/guest/mpi.sh"
