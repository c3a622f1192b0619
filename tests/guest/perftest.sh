# perftest's latency tools, atomics, several QPs (-q), both directions at
# once (-b), UC and UD, between two roxe guests: traffic.sh's "perftest"
# set (cm.sh runs the -R modes). Both guests run this wrapper.
export ROXE_TRAFFIC_SET=perftest
. "$ROXE_ROOT/tests/guest/traffic.sh"
