# tests/guest/mpi.sh with the last guest's link down for 10 s in the
# middle of the run (issue 18, "Fault"): scenario mpi-fault.
MPI_FAULT=${ROXE_PEERS:-4}
. "$ROXE_ROOT/tests/guest/mpi.sh"
