# 5% loss, with reordering and duplication, roxe on both guests.
export ROXE_LOSSY_NETEM="loss 5% duplicate 2% delay 2ms reorder 10% 50%"
. "$ROXE_ROOT/tests/guest/lossy.sh"
