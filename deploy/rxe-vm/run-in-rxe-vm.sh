#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run-in-rxe-vm.sh - h3000 ingest's Soft-RoCE test bed: run one command inside a
# throw-away QEMU VM that boots Debian's own kernel (linux-image-*-amd64, which has
# CONFIG_RDMA_RXE=m) with a Soft-RoCE device (rdma_rxe on a dummy netdev) already
# configured, the host filesystem visible (read-only; RXE_VM_RW dirs read-write), and
# the command's stdout, stderr and exit status handed back to the caller.
#
# Used by `make test` (tests/rdma.cmake -> tests/rxe/run_all.sh) and bench/rdma.sh.
# Derived from the recipe measured in /work/shared/rxe-vm (NOTES.md there); the project
# owns this copy.  See deploy/rxe-vm/README.md for the pitfalls it encodes.
#
# Made for Debian 12 (bookworm) hosts without RDMA hardware and without a kernel
# that has CONFIG_INFINIBAND (CI VMs, Firecracker).  Installs its packages with apt
# when run as root on a fresh machine; after that root only if the cache dir / rw dirs
# need it.
#
# Usage:  run-in-rxe-vm.sh [options] [--] COMMAND [ARG...]
#         run-in-rxe-vm.sh --selftest      # ibv_devinfo + ib_write_bw + ib_read_bw + rping in the VM
#         run-in-rxe-vm.sh --prepare       # only install packages and build the cache
# See usage() below for options and environment variables.
set -uo pipefail

PROG=${0##*/}
SELF_VERSION=9          # bump when the cached initramfs layout changes (h3000 copy: 9)

: "${RXE_VM_CACHE:=/tmp/rxe-vm-cache}"   # kernel, vmlinux, initramfs (built once)
: "${RXE_VM_ACCEL:=tcg}"                 # tcg | kvm  (KVM did not boot Linux on the Firecracker host this was made on)
: "${RXE_VM_CPU:=}"                      # default: max,-erms,-fsrm (tcg) / host (kvm)
: "${RXE_VM_MEM:=2048}"                  # MiB
: "${RXE_VM_SMP:=2}"
: "${RXE_VM_TIMEOUT:=1200}"              # seconds for the whole VM run
: "${RXE_VM_NETDEV:=dummy}"              # dummy (recommended) | lo (no rdma_cm!)
: "${RXE_VM_IP:=169.254.77.1/24}"        # address of the dummy netdev inside the guest
: "${RXE_VM_MTU:=9000}"                  # dummy MTU; >=4200 gives rxe active_mtu 4096
: "${RXE_VM_NUMA:=1}"                    # NUMA nodes (qemu -numa): vCPUs and memory split evenly
: "${RXE_VM_NICS:=1}"                    # dummy netdevs, each with its own rxe device and subnet
: "${RXE_VM_IPS:=}"                      # their addresses (space-separated CIDRs); default:
                                         # RXE_VM_IP, then 169.254.78.1/24, 169.254.79.1/24, ...
: "${RXE_VM_RW=$PWD}"                    # ':'-separated host dirs shared read-write
: "${RXE_VM_KERNEL_PKG:=}"               # e.g. linux-image-6.1.0-56-amd64 (default: newest cached, else apt)
: "${RXE_VM_REFRESH:=0}"                 # 1: re-resolve linux-image-amd64 via apt
: "${RXE_VM_NO_INSTALL:=0}"              # 1: never call apt-get install
: "${RXE_VM_VERBOSE:=0}"                 # 1: print guest kernel log + setup trace at the end
: "${RXE_VM_QUIET:=0}"                   # 1: no '[rxe-vm]' status lines on stderr
: "${RXE_VM_KEEP:=0}"                    # 1: keep the per-run dir (console.log etc.)

PKGS=(qemu-system-x86 busybox-static kmod cpio xz-utils iproute2 util-linux gzip
      ibverbs-providers ibverbs-utils rdmacm-utils perftest rdma-core)

usage() {
  cat <<EOF
Usage: $PROG [options] [--] COMMAND [ARG...]
       $PROG --selftest | --prepare | --help

Boots Debian's linux-image-amd64 kernel under qemu-system-x86_64 (TCG by default),
with the host's / shared read-only (9p) plus a tmpfs overlay (guest writes are
discarded), the dirs in RXE_VM_RW shared read-write at the same paths, and
Soft-RoCE set up:  modprobe rdma_rxe rdma_ucm;  dummy netdev rxed0 ($RXE_VM_IP, mtu $RXE_VM_MTU);
rdma link add rxe0 type rxe netdev rxed0.  COMMAND then runs as root in the same
working directory, with the caller's exported environment, stdin=/dev/null,
'ulimit -l unlimited', and these extra variables:
  RXE_DEV=rxe0  RXE_NETDEV=rxed0  RXE_IP=<ip>  RXE_GID_INDEX=<gid index of ::ffff:<ip>, RoCE v2>
With RXE_VM_NICS=N (N > 1) there are N such: rxed<i> with rxe<i>, each on its own /24
(RXE_VM_IPS), and the lists RXE_DEVS RXE_NETDEVS RXE_IPS RXE_GID_INDEXES (space-separated,
in order) plus RXE_NICS=N; RXE_DEV.. name the first. With RXE_VM_NUMA=M (M > 1) the guest
has M NUMA nodes (qemu -numa, RXE_VM_SMP and RXE_VM_MEM split evenly; RXE_VM_SMP must be a
multiple of M), RXE_NUMA=M, and RXE_DEV_NODES names the node each rxe<i> stands for (i mod
M): the kernel gives a dummy netdev's rxe no NUMA node, so tests say it (rdma-dev = rxe1@1).
Its stdout/stderr are streamed back to this script's stdout/stderr, and its exit
status becomes this script's exit status.

Exit status: COMMAND's status; 124 if RXE_VM_TIMEOUT expired; 125 if the VM or
the rxe setup failed (guest console log is printed to stderr).

Options:
  --selftest   run ibv_devices, ibv_devinfo, ib_write_bw (1 MiB, GID and rdma_cm), ib_read_bw, rping
  --prepare    install packages (apt-get) and build the kernel/initramfs cache, then exit
  -v           same as RXE_VM_VERBOSE=1
  -h, --help   this text

Environment (defaults in brackets):
  RXE_VM_CACHE [$RXE_VM_CACHE]   RXE_VM_ACCEL [tcg|kvm]   RXE_VM_CPU [max,-erms,-fsrm]
  RXE_VM_MEM [2048]  RXE_VM_SMP [2]  RXE_VM_TIMEOUT [1200]  RXE_VM_NETDEV [dummy|lo]
  RXE_VM_IP [169.254.77.1/24]  RXE_VM_MTU [9000]  RXE_VM_RW [\$PWD; '' for none]
  RXE_VM_NUMA [1]  RXE_VM_NICS [1]  RXE_VM_IPS [RXE_VM_IP 169.254.78.1/24 ...]
  RXE_VM_KERNEL_PKG  RXE_VM_REFRESH  RXE_VM_NO_INSTALL  RXE_VM_VERBOSE  RXE_VM_QUIET  RXE_VM_KEEP
  RXE_VM_QEMU_ARGS (extra qemu arguments, word-split)   RXE_VM_APPEND (extra kernel command line)

Examples:
  $PROG --selftest
  $PROG ./build/my_verbs_test --dev rxe0
  $PROG bash -c 'ib_write_bw -d \$RXE_DEV -x \$RXE_GID_INDEX & sleep 1; ib_write_bw -d \$RXE_DEV -x \$RXE_GID_INDEX \$RXE_IP'
EOF
}

say()  { [ "$RXE_VM_QUIET" = 1 ] || printf '[rxe-vm] %s\n' "$*" >&2; }
die()  { printf '[rxe-vm] ERROR: %s\n' "$*" >&2; exit 125; }
now()  { date +%s.%N; }
since(){ awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

MODE=run
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --selftest) MODE=selftest; shift ;;
    --prepare) MODE=prepare; shift ;;
    -v) RXE_VM_VERBOSE=1; shift ;;
    --) shift; break ;;
    -*) echo "$PROG: unknown option $1 (use -- before a command starting with '-')" >&2; exit 125 ;;
    *) break ;;
  esac
done
if [ "$MODE" = run ] && [ $# -eq 0 ]; then usage >&2; exit 125; fi
T0=$(now)

# ---------------------------------------------------------------- packages
ensure_packages() {
  local missing=() p
  for p in "${PKGS[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = 'install ok installed' ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$RXE_VM_NO_INSTALL" = 1 ] && die "missing packages: ${missing[*]} (RXE_VM_NO_INSTALL=1)"
  [ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]}; run once as root or apt-get install them"
  local t; t=$(now)
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || die "apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed"
  APT_UPDATED=1
  say "packages installed in $(since "$t")s"
}

# ---------------------------------------------------------------- kernel + initramfs cache
resolve_kernel_pkg() {
  if [ -n "$RXE_VM_KERNEL_PKG" ]; then echo "$RXE_VM_KERNEL_PKG"; return; fi
  if [ "$RXE_VM_REFRESH" != 1 ]; then
    local d; d=$(ls -1d "$RXE_VM_CACHE"/linux-image-*/ready 2>/dev/null | sort -V | tail -1)
    if [ -n "$d" ]; then d=${d%/ready}; echo "${d##*/}"; return; fi
  fi
  local pkg
  pkg=$(apt-cache depends --no-recommends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$pkg" ] && [ "${APT_UPDATED:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || true
    pkg=$(apt-cache depends --no-recommends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  fi
  [ -n "$pkg" ] || die "cannot resolve linux-image-amd64 (apt-get update?) - set RXE_VM_KERNEL_PKG"
  echo "$pkg"
}

build_kernel_cache() {     # $1 = package name, e.g. linux-image-6.1.0-56-amd64
  local pkg=$1 dir=$RXE_VM_CACHE/$1 t; t=$(now)
  [ -f "$dir/ready" ] && [ "$(cat "$dir/ready")" = "$SELF_VERSION" ] && return 0
  say "building VM kernel cache for $pkg in $dir (one-off)"
  rm -rf "$dir"; mkdir -p "$dir/dl" || die "cannot create $dir"
  if ! ( cd "$dir/dl" && apt-get -o APT::Sandbox::User=root -qq download "$pkg" ) >&2; then
    [ "$(id -u)" = 0 ] && apt-get -o DPkg::Lock::Timeout=600 update -qq >&2   # stale package lists?
    ( cd "$dir/dl" && apt-get -o APT::Sandbox::User=root -qq download "$pkg" ) >&2 || die "apt-get download $pkg failed"
  fi
  dpkg-deb -x "$dir"/dl/*.deb "$dir/root" || die "dpkg-deb -x failed"
  rm -rf "$dir/dl"
  local kver; kver=$(ls "$dir/root/lib/modules" | head -1)
  [ -n "$kver" ] && [ -f "$dir/root/boot/vmlinuz-$kver" ] || die "no kernel in $pkg"
  grep -q '^CONFIG_RDMA_RXE=[ym]' "$dir/root/boot/config-$kver" || die "$pkg has no CONFIG_RDMA_RXE"
  depmod -b "$dir/root" "$kver" || die "depmod failed"
  # Uncompressed ELF vmlinux -> qemu boots it through the PVH entry point, skipping the
  # in-guest xz decompression (saves ~7 s per boot under TCG).
  local vmlinuz=$dir/root/boot/vmlinuz-$kver off
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -1 | cut -d: -f1)
  # (tail gets SIGPIPE when xz stops after the first stream: judge by the ELF magic only)
  [ -n "$off" ] && { tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream > "$dir/vmlinux"; } 2>/dev/null
  if [ "$(head -c4 "$dir/vmlinux" 2>/dev/null | od -An -c | tr -d ' ')" != '177ELF' ]; then
    rm -f "$dir/vmlinux"   # fall back to bzImage
  fi
  # initramfs: static busybox + virtio/9p/overlay modules + /init
  local ird=$dir/initramfs.d m f
  mkdir -p "$ird"/{bin,mods,proc,sys,dev,lower,rw,newroot}
  cp /bin/busybox "$ird/bin/busybox" || die "no /bin/busybox (busybox-static)"
  # Modules are insmod-ed from the initramfs (much faster than modprobe over 9p under TCG).
  # crc32_generic: rxe needs the crypto "crc32" shash (CONFIG_CRYPTO_CRC32=m) for its ICRC and
  # 'rdma link add' fails if it cannot be loaded.  crc32-pclmul is deliberately NOT loaded:
  # under TCG the emulated PCLMULQDQ makes it slower than crc32-generic (~1.5x lower bandwidth).
  : > "$ird/modlist"
  for m in virtio_pci 9pnet_virtio 9p overlay virtio_console \
           crc32_generic rdma_rxe ib_uverbs rdma_ucm dummy; do
    modprobe -d "$dir/root" -S "$kver" --show-depends "$m" | awk '$1=="insmod"'
  done | awk '!seen[$2]++' | while read -r _ f args; do
    cp "$f" "$ird/mods/" && echo "$(basename "$f" .ko) $args" >> "$ird/modlist"
  done
  grep -q '^rdma_rxe' "$ird/modlist" || die "rdma_rxe.ko not found in $pkg"
  write_init > "$ird/init"; chmod 755 "$ird/init"
  ( cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1 ) > "$dir/initramfs.gz" || die "cpio failed"
  echo "$kver" > "$dir/kver"
  echo "$SELF_VERSION" > "$dir/ready"
  say "kernel cache ready in $(since "$t")s"
}

write_init() {  # stage 1: busybox /init inside the initramfs
cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
log() { read -r up _ < /proc/uptime; echo "[rxe-vm init $up] $*" > /dev/ttyS0; }
fail() { log "FATAL: $*"; echo b > /proc/sysrq-trigger; sleep 10; }
log start
while read -r m args; do
  insmod /mods/$m.ko $args 2>/dev/null || echo "[rxe-vm init] insmod $m failed" > /dev/ttyS0
done < /modlist
log "modules loaded"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower || fail "9p hostroot"
mount -t tmpfs -o mode=755 tmpfs /rw && mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || fail overlay
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys; mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts; mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t tmpfs -o mode=755 tmpfs /newroot/run; mkdir -p /newroot/run/rxe-vm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rxeio /newroot/run/rxe-vm || fail "9p rxeio"
# read-write host dirs: lines "tag path"
while read -r tag path; do
  [ -n "$tag" ] || continue
  mkdir -p "/newroot$path" && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "$tag" "/newroot$path" \
    || echo "[rxe-vm init] mount $tag at $path failed" > /dev/ttyS0
done < /newroot/run/rxe-vm/mounts
kd=$(cat /newroot/run/rxe-vm/kmoddir)
mkdir -p /newroot/lib/modules && mount -o bind "/newroot$kd" /newroot/lib/modules || fail "bind /lib/modules"
log "switch_root"
exec switch_root /newroot /bin/bash /run/rxe-vm/stage2.sh
EOF
}

write_stage2() {  # stage 2: PID 1 in the overlay of the host root
cat <<'EOF'
#!/bin/bash
# PID 1 inside the VM.  Trace -> ttyS0 (console.log on the host).
exec 3>/dev/ttyS0 </dev/null >&3 2>&3
IO=/run/rxe-vm
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log()  { local up _; read -r up _ < /proc/uptime; echo "[rxe-vm stage2 $up] $*" >&3; }   # builtins only: every exec costs under TCG
off()  { sync; echo b > /proc/sysrq-trigger; while :; do :; done; }  # reboot = qemu exit (-no-reboot); no exec: 9p may be gone
setup_fail() { log "SETUP FAILED: $*"; echo "[rxe-vm] guest setup failed: $*" > "$ERR"; echo 125 > $IO/rc; off; }
. $IO/config
log start
# virtio-serial ports for the command's stdout/stderr
OUT=/dev/null ERR=/dev/ttyS0
for p in /sys/class/virtio-ports/*; do
  case "$(< $p/name)" in rxe.out) OUT=/dev/${p##*/};; rxe.err) ERR=/dev/${p##*/};; esac
done
echo rxe-vm > /proc/sys/kernel/hostname
# modules were loaded by the initramfs; modprobe works too (/lib/modules is bound)
for m in rdma_rxe ib_uverbs rdma_ucm; do [ -d /sys/module/$m ] || modprobe $m || setup_fail "modprobe $m"; done
# rxe<i> on netdev $1 with address $2: waits for ACTIVE and the ::ffff:<ip> RoCE v2 GID,
# whose index it leaves in GIDX
rxe_up() {
  local dev=$1 nd=$2 ip=$3 a b c d want st g i
  rdma link add $dev type rxe netdev $nd || setup_fail "rdma link add $dev type rxe netdev $nd"
  IFS=. read -r a b c d <<< "$ip"
  printf -v want '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"   # ::ffff:a.b.c.d
  GIDX=
  for ((i = 0; i < 100; i++)); do
    st=$(< /sys/class/infiniband/$dev/ports/1/state) 2>/dev/null
    for g in 0 1 2 3 4 5 6 7; do
      [ "$(< /sys/class/infiniband/$dev/ports/1/gids/$g)" = "$want" ] 2>/dev/null && { GIDX=$g; break; }
    done
    case "$st" in *ACTIVE*) [ -n "$GIDX" ] && break;; esac
    sleep 0.1
  done
  [ -n "$GIDX" ] || setup_fail "$dev not ACTIVE or no IPv4 GID (state=$st)"
  log "$dev ready on $nd ip=$ip gid_index=$GIDX state=$st"
}
if [ "$NETDEV_KIND" = lo ]; then
  ND=lo; IPADDR=127.0.0.1
  ip link set lo up
else
  ND=rxed0; IPADDR=${IPCIDR%/*}
  ip -batch - <<EOB || setup_fail "creating dummy netdev $ND ($IPCIDR, mtu $MTU)"
link set lo up
link add $ND mtu $MTU type dummy
addr add $IPCIDR dev $ND
link set $ND up
EOB
fi
rxe_up rxe0 $ND $IPADDR
RXE_DEVS=rxe0 RXE_NETDEVS=$ND RXE_IPS=$IPADDR RXE_GID_INDEXES=$GIDX RXE_DEV_NODES=0
FIRST_GIDX=$GIDX
# more NICs: rxed<i> with rxe<i>, each on its own subnet
for ((n = 1; n < NICS; n++)); do
  cidr=${IPLIST[$n]}
  ip -batch - <<EOB || setup_fail "creating dummy netdev rxed$n ($cidr, mtu $MTU)"
link add rxed$n mtu $MTU type dummy
addr add $cidr dev rxed$n
link set rxed$n up
EOB
  rxe_up rxe$n rxed$n ${cidr%/*}
  RXE_DEVS+=" rxe$n" RXE_NETDEVS+=" rxed$n" RXE_IPS+=" ${cidr%/*}" RXE_GID_INDEXES+=" $GIDX"
  RXE_DEV_NODES+=" $((n % NUMA))"
done
GIDX=$FIRST_GIDX
[ "$NUMA" = 1 ] || [ -d /sys/devices/system/node/node$((NUMA - 1)) ] || setup_fail "the guest has no NUMA node $((NUMA - 1)) (qemu -numa)"
echo "$ND $IPADDR $GIDX" > $IO/rxe-info
ulimit -l unlimited
ulimit -c 0
export RXE_DEV=rxe0 RXE_NETDEV=$ND RXE_IP=$IPADDR RXE_GID_INDEX=$GIDX RXE_VM=1
log "running command"
( . $IO/env.sh 2>/dev/null
  export RXE_DEV=rxe0 RXE_NETDEV=$ND RXE_IP=$IPADDR RXE_GID_INDEX=$GIDX RXE_VM=1
  if [ "$NICS" -gt 1 ] || [ "$NUMA" -gt 1 ]; then
    export RXE_NICS=$NICS RXE_NUMA=$NUMA RXE_DEVS RXE_NETDEVS RXE_IPS RXE_GID_INDEXES RXE_DEV_NODES
  fi
  cd "$CWD" 2>/dev/null || cd /
  . $IO/cmd.sh ) </dev/null >"$OUT" 2>"$ERR"
rc=$?
log "command exited $rc"
echo $rc > $IO/rc
off
EOF
}

SELFTEST_CMD='set -u
ip=$RXE_IP; x=$RXE_GID_INDEX; fails=0
chk() { if [ "$1" = 0 ]; then echo "PASS: $2"; else echo "FAIL: $2 (rc=$1)"; fails=$((fails+1)); fi; }
echo "== rdma link"; rdma link show
echo "== ibv_devices"; ibv_devices; chk $? ibv_devices
echo "== ibv_devinfo"; ibv_devinfo -d "$RXE_DEV" | grep -E "hca_id|transport|state|mtu|link_layer"; chk $? ibv_devinfo
bw() { local tag=$1; shift
  timeout 120 ib_write_bw "$@" >/tmp/bw-srv.log 2>&1 & local sp=$!; sleep 1
  local t0=$(date +%s.%N); timeout 120 ib_write_bw "$@" "$ip" >/tmp/bw-cli.log 2>&1; local rc=$?; wait $sp; local rs=$?
  local el=$(awk -v a=$t0 -v b=$(date +%s.%N) "BEGIN{printf \"%.1f\", b-a}")
  echo "   #bytes  #iters  BW-peak[Gb/s]  BW-avg[Gb/s]  MsgRate[Mpps]  (client wall ${el}s)"
  grep -A1 "#bytes" /tmp/bw-cli.log | tail -1
  [ $rc = 0 ] && [ $rs = 0 ]; local r=$?; [ $r = 0 ] || tail -5 /tmp/bw-cli.log /tmp/bw-srv.log; chk $r "$tag"; }
echo "== ib_write_bw 1 MiB x 200, GID index $x (RoCE v2, no rdma_cm)"
bw "ib_write_bw -x $x" -d "$RXE_DEV" -x "$x" -s 1048576 -n 200 -F --report_gbits
rbw() { local tag=$1; shift
  timeout 120 ib_read_bw "$@" >/tmp/rbw-srv.log 2>&1 & local sp=$!; sleep 1
  timeout 120 ib_read_bw "$@" "$ip" >/tmp/rbw-cli.log 2>&1; local rc=$?; wait $sp; local rs=$?
  grep -A1 "#bytes" /tmp/rbw-cli.log | tail -1
  [ $rc = 0 ] && [ $rs = 0 ]; local r=$?; [ $r = 0 ] || tail -5 /tmp/rbw-cli.log /tmp/rbw-srv.log; chk $r "$tag"; }
echo "== ib_read_bw 1 MiB x 100, GID index $x"
rbw "ib_read_bw -x $x" -d "$RXE_DEV" -x "$x" -s 1048576 -n 100 -F --report_gbits
if [ "$RXE_NETDEV" != lo ]; then
  echo "== ib_write_bw 1 MiB x 200 via rdma_cm (-R)"
  bw "ib_write_bw -R" -R -d "$RXE_DEV" -s 1048576 -n 200 -F --report_gbits
  echo "== rping x 5"
  timeout 60 rping -s -a "$ip" -C 5 >/tmp/rping-srv.log 2>&1 & sp=$!; sleep 1
  timeout 60 rping -c -a "$ip" -C 5 -v; rc=$?; wait $sp; rs=$?
  [ $rc = 0 ] && [ $rs = 0 ]; chk $? "rping"
fi
echo "selftest: $fails failed"; [ $fails = 0 ]'

# ---------------------------------------------------------------- main
command -v flock >/dev/null || die "flock missing (util-linux)"
ensure_packages
mkdir -p "$RXE_VM_CACHE" || die "cannot create $RXE_VM_CACHE"
exec 9>"$RXE_VM_CACHE/.lock"
flock 9
KPKG=$(resolve_kernel_pkg) || exit 125
build_kernel_cache "$KPKG"
flock -u 9
KDIR=$RXE_VM_CACHE/$KPKG
KVER=$(cat "$KDIR/kver")
KERNEL=$KDIR/vmlinux; [ -f "$KERNEL" ] || KERNEL=$KDIR/root/boot/vmlinuz-$KVER
[ "$MODE" = prepare ] && { say "prepared: $KPKG ($KERNEL) in $(since "$T0")s"; exit 0; }

IO=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm-run.XXXXXX") || die "mktemp failed"
QPID='' OPID='' EPID=''
cleanup() {
  [ -n "$QPID" ] && kill "$QPID" 2>/dev/null
  for p in $OPID $EPID; do kill "$p" 2>/dev/null; done
  if [ "$RXE_VM_KEEP" = 1 ]; then say "run dir kept: $IO"; else rm -rf "$IO"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

write_stage2 > "$IO/stage2.sh"
# NICs beyond the first: each on its own /24 (169.254.78.1/24, ...) unless RXE_VM_IPS says
[[ $RXE_VM_NICS =~ ^[1-8]$ ]] || die "RXE_VM_NICS must be 1..8"
[[ $RXE_VM_NUMA =~ ^[1-8]$ ]] || die "RXE_VM_NUMA must be 1..8"
[ $(( RXE_VM_SMP % RXE_VM_NUMA )) = 0 ] || die "RXE_VM_SMP ($RXE_VM_SMP) must be a multiple of RXE_VM_NUMA ($RXE_VM_NUMA)"
[ "$RXE_VM_NICS" = 1 ] || [ "$RXE_VM_NETDEV" = dummy ] || die "RXE_VM_NICS > 1 needs RXE_VM_NETDEV=dummy"
read -r -a IPS <<< "${RXE_VM_IPS:-$RXE_VM_IP}"
for ((n = ${#IPS[@]}; n < RXE_VM_NICS; n++)); do IPS[n]=169.254.$((77 + n)).1/24; done
{ printf 'NETDEV_KIND=%q\nIPCIDR=%q\nMTU=%q\nCWD=%q\nNICS=%q\nNUMA=%q\n' "$RXE_VM_NETDEV" "${IPS[0]}" \
    "$RXE_VM_MTU" "$PWD" "$RXE_VM_NICS" "$RXE_VM_NUMA"
  printf 'IPLIST=('; printf ' %q' "${IPS[@]}"; printf ' )\n'; } > "$IO/config"
printf '%s\n' "$KDIR/root/lib/modules" > "$IO/kmoddir"
export -p | grep -vE '^declare -x (PWD|OLDPWD|SHLVL|_|HOSTNAME|BASHOPTS|SHELLOPTS|EUID|PPID|UID)=' > "$IO/env.sh"
if [ "$MODE" = selftest ]; then
  printf 'bash -c %q\n' "$SELFTEST_CMD" > "$IO/cmd.sh"
else
  { printf 'exec'; printf ' %q' "$@"; printf '\n'; } > "$IO/cmd.sh"
fi

qesc() { printf '%s' "${1//,/,,}"; }   # qemu option values: ',' -> ',,'
# shellcheck disable=SC2054  # the commas are qemu's, not array separators
QEMU=(qemu-system-x86_64 -nodefaults -no-reboot -display none -monitor none
      -M pc -m "$RXE_VM_MEM" -smp "$RXE_VM_SMP"
      -kernel "$KERNEL" -initrd "$KDIR/initramfs.gz"
      -append "console=ttyS0 quiet panic=-1 cryptomgr.notests mitigations=off no_timer_check pci=noacpi ${RXE_VM_APPEND:-}"
      -serial "file:$IO/console.log"
      -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
      -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
      -fsdev "local,id=rxeio,path=$(qesc "$IO"),security_model=none,multidevs=remap"
      -device virtio-9p-pci,fsdev=rxeio,mount_tag=rxeio
      -device virtio-serial-pci,max_ports=3
      -chardev "file,id=out,path=$(qesc "$IO/out.fifo")" -device virtserialport,chardev=out,name=rxe.out
      -chardev "file,id=err,path=$(qesc "$IO/err.fifo")" -device virtserialport,chardev=err,name=rxe.err)
case "$RXE_VM_ACCEL" in
  kvm) CPU=${RXE_VM_CPU:-host} ;;
  tcg) CPU=${RXE_VM_CPU:-max,-erms,-fsrm} ;;   # ERMS/FSRM make the kernel use rep movsb: slow under TCG
  *) die "RXE_VM_ACCEL must be tcg or kvm" ;;
esac
QEMU+=(-accel "$RXE_VM_ACCEL" -cpu "$CPU")
# NUMA: the vCPUs and the memory split evenly over RXE_VM_NUMA nodes (the last takes the rest)
if [ "$RXE_VM_NUMA" -gt 1 ]; then
  per_cpu=$(( RXE_VM_SMP / RXE_VM_NUMA )) per_mem=$(( RXE_VM_MEM / RXE_VM_NUMA ))
  for ((n = 0; n < RXE_VM_NUMA; n++)); do
    mem=$per_mem
    [ $n = $((RXE_VM_NUMA - 1)) ] && mem=$(( RXE_VM_MEM - per_mem * (RXE_VM_NUMA - 1) ))
    QEMU+=(-object "memory-backend-ram,id=numa$n,size=${mem}M"
           -numa "node,nodeid=$n,cpus=$(( n * per_cpu ))-$(( (n + 1) * per_cpu - 1 )),memdev=numa$n")
  done
fi
# shellcheck disable=SC2206
[ -n "${RXE_VM_QEMU_ARGS:-}" ] && QEMU+=($RXE_VM_QEMU_ARGS)   # extra qemu args, word-split
: > "$IO/mounts"
n=0
IFS=: read -r -a RWDIRS <<< "$RXE_VM_RW"
for d in "${RWDIRS[@]}"; do
  [ -n "$d" ] || continue
  d=$(cd "$d" 2>/dev/null && pwd -P) || { say "RXE_VM_RW: skipping $d (not a dir)"; continue; }
  case "$d" in /|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/run|/run/*) say "RXE_VM_RW: skipping $d"; continue;; esac
  n=$((n + 1))
  QEMU+=(-fsdev "local,id=rw$n,path=$(qesc "$d"),security_model=none,multidevs=remap"
         -device "virtio-9p-pci,fsdev=rw$n,mount_tag=rw$n")
  printf 'rw%s %s\n' "$n" "$d" >> "$IO/mounts"
done

mkfifo "$IO/out.fifo" "$IO/err.fifo" || die mkfifo
cat "$IO/out.fifo" & OPID=$!
cat "$IO/err.fifo" >&2 & EPID=$!
say "booting $KVER ($RXE_VM_ACCEL, -cpu $CPU, ${RXE_VM_SMP} vCPU, ${RXE_VM_MEM} MiB$([ "$RXE_VM_NUMA" = 1 ] || echo ", $RXE_VM_NUMA NUMA nodes")$([ "$RXE_VM_NICS" = 1 ] || echo ", $RXE_VM_NICS NICs")), prep took $(since "$T0")s"
TB=$(now)
timeout -k 10 "$RXE_VM_TIMEOUT" "${QEMU[@]}" </dev/null >"$IO/qemu.log" 2>&1 &
QPID=$!
wait "$QPID"; QRC=$?; QPID=
# If qemu died before opening a fifo, the cat on it is still blocked in open(): an O_RDWR
# open of a fifo never blocks on Linux and gives that cat a writer, whose close is its EOF.
for f in out err; do exec 7<>"$IO/$f.fifo"; exec 7>&-; done
wait "$OPID" "$EPID" 2>/dev/null; OPID='' EPID='' 

if [ "$RXE_VM_VERBOSE" = 1 ]; then
  echo "----- guest console ($IO/console.log) -----" >&2; tr -d '\r' < "$IO/console.log" >&2
  echo "----- qemu -----" >&2; cat "$IO/qemu.log" >&2
fi
if [ -s "$IO/rc" ]; then
  RC=$(cat "$IO/rc")
  [ -s "$IO/rxe-info" ] && read -r ND IPA GIDX < "$IO/rxe-info" && \
    say "rxe0 on $ND ip $IPA gid-index $GIDX; command exit $RC; VM wall $(since "$TB")s, total $(since "$T0")s"
  exit "$RC"
fi
if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
  echo "[rxe-vm] ERROR: timeout after ${RXE_VM_TIMEOUT}s (RXE_VM_TIMEOUT)" >&2; RC=124
else
  echo "[rxe-vm] ERROR: VM ended without a result (qemu exit $QRC)" >&2; RC=125
fi
if [ "$RXE_VM_VERBOSE" != 1 ]; then
  echo "----- qemu -----" >&2; tail -20 "$IO/qemu.log" >&2
  [ -s "$IO/qemu.log" ] || echo "(qemu printed nothing)" >&2
  echo "----- guest console (tail) -----" >&2; tr -d '\r' < "$IO/console.log" | tail -40 >&2
  [ -s "$IO/console.log" ] || echo "(the guest printed nothing: kernel did not start? try RXE_VM_VERBOSE=1, RXE_VM_MEM)" >&2
fi
exit "$RC"
