#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# engine: the node's RDMA engine (dataplane/rdma*.c) on real Soft-RoCE, without gRPC:
# rdma_cm listener + adaptive poller pull frames of 1 B .. 8 MiB by chunked READs and they
# are byte-identical; 24 frames in flight; a bad rkey fails exactly that frame and the
# others complete after the producer reconnects; a READ beyond the producer's MR fails that
# frame only; a vanished producer's frames fail after the park timeout, all slots back.
set -euo pipefail
: "${ING_BUILD_DIR:?}" "${RXE_DEV:?}" "${RXE_IP:?}"
bin=$ING_BUILD_DIR/tests/rdma_verbs_check
[ -x "$bin" ] || { echo "missing $bin (build target rdma_verbs_check)"; exit 1; }
ING_LOG_LEVEL=${ING_LOG_LEVEL:-info} "$bin" --dev "$RXE_DEV" --ip "$RXE_IP" engine
