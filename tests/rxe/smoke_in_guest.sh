#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# smoke: the guest has a usable Soft-RoCE device: ibv_devinfo lists $RXE_DEV with an ACTIVE
# port, and rdma_verbs_check (real verbs, no fakes) opens it and builds PD/MR/CQ/channel.
set -euo pipefail
: "${ING_BUILD_DIR:?}" "${RXE_DEV:?}"
out=$(ibv_devinfo -d "$RXE_DEV")
echo "$out" | grep -E 'hca_id|state|active_mtu|link_layer'
echo "$out" | grep -q "hca_id:[[:space:]]*$RXE_DEV" || { echo "ibv_devinfo does not list $RXE_DEV"; exit 1; }
echo "$out" | grep -q 'PORT_ACTIVE' || { echo "$RXE_DEV port not ACTIVE"; exit 1; }
bin=$ING_BUILD_DIR/tests/rdma_verbs_check
[ -x "$bin" ] || { echo "missing $bin (build target rdma_verbs_check)"; exit 1; }
"$bin" --dev "$RXE_DEV" basic
