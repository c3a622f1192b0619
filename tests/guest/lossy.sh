# traffic.sh's RC transfers through a lossy link: netem on both guests'
# egress, with the parameters in ROXE_LOSSY_NETEM (default: 1% loss) and
# rxe on the guest whose role is ROXE_LOSSY_RXE, if set. The lossy-*.sh
# wrappers set these; both guests run the same wrapper.
export ROXE_TRAFFIC_SET=lossy
export ROXE_TRAFFIC_NETEM=${ROXE_LOSSY_NETEM:-loss 1%}
[ -n "${ROXE_LOSSY_RXE:-}" ] && export "ROXE_TRAFFIC_DRV$ROXE_LOSSY_RXE=rxe"
. "$ROXE_ROOT/tests/guest/traffic.sh"
