// Hopper (sm_90a) building blocks of the warp-specialized GEMM (templates/gemm_sm90.cuh):
// mbarriers, bulk tensor copies (TMA) and warpgroup MMA (wgmma). Every helper is PTX from the ISA's sm_90 chapter; the bodies compile only for
// sm_90a (__CUDA_ARCH_FEAT_SM90_ALL), elsewhere they are empty so that the templates still compile
// for every arch the CPU suite builds (the plan lists these kernels only for sm_90 targets).
//
// mbarrier phases: a barrier starts in phase 0; `wait(bar, parity)` returns once the phase with that
// parity has completed. A fresh barrier therefore passes wait(bar, 1) at once (the phase "before"
// phase 0 counts as complete), which is how producers start on empty buffers: they wait with the
// parity opposite to the consumers'.
//
// wgmma shared-memory operands: K-major tiles of 64 16-bit elements per row (128 bytes) written by
// TMA with CU_TENSOR_MAP_SWIZZLE_128B, so 16-byte chunk j of row r sits at chunk j ^ (r % 8); the
// descriptor names that layout (swizzle mode 1 = 128B), SBO = 1024 bytes between 8-row groups, LBO
// unused for swizzled K-major operands (1). The tile base must be 1024-byte aligned; the k16 steps
// inside the 64-element row advance the start address by 32 bytes.
#pragma once
#include "common/types.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSKC_SM90A 1
#else
#define DSKC_SM90A 0
#endif

namespace dskc {
namespace sm90 {

template <typename A, typename B>
struct SameType {
  static constexpr bool value = false;
};
template <typename A>
struct SameType<A, A> {
  static constexpr bool value = true;
};

// A CUtensorMap as the kernel sees it (cuda.h's CUtensorMap: 128 bytes, 128-byte aligned; the
// runtime encodes it with cuTensorMapEncodeTiled and passes it inside a __grid_constant__ params
// struct, so its address is in the kernel parameter space, as cp.async.bulk.tensor requires).
struct alignas(128) TmaDescriptor {
  unsigned long long opaque[16];
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// This thread's warpgroup (threadIdx.x / 128) as a value ptxas knows is the same in every lane of the
// warp (broadcast from lane 0, as CUTLASS's canonical_warp_group_idx does). Computed from threadIdx
// directly, the index and everything derived from it (stage addresses, hence the wgmma descriptors)
// live in vector registers and each descriptor is moved to uniform registers (R2UR) before its HGMMA;
// with the broadcast they are uniform-datapath values (gemm_inter_fwd: 168 -> 157 registers, 16% less
// code; bench/NOTES.md v48).
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if DSKC_SM90A
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the barrier initializations visible to the other threads and to the async (TMA) proxy.
__device__ __forceinline__ void mbar_init_fence() {
#if DSKC_SM90A
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival (release semantics: this thread's earlier shared-memory writes are visible to a
// thread whose wait sees the phase complete).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if DSKC_SM90A
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// One arrival that also expects `bytes` of TMA transactions before the phase can complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if DSKC_SM90A
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if DSKC_SM90A
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// 2-D bulk tensor copy global -> shared: the box at (inner coordinate c0, outer coordinate c1) of
// the tensor map lands at `dst` and completes `bytes` on `bar`. Rows past the tensor's end are
// zero-filled.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDescriptor* map, uint32_t bar, int c0, int c1) {
#if DSKC_SM90A
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
#endif
}
// The same for a 3-D tensor map (coordinates innermost first): the box at (c0, c1, c2); elements
// outside the tensor (e.g. rows past one sequence's end, where dim 1 is the sequence) read as zero.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const TmaDescriptor* map, uint32_t bar, int c0, int c1,
                                            int c2) {
#if DSKC_SM90A
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}
__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* map) {
#if DSKC_SM90A
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}
// A 4-byte asynchronous copy global -> shared (cp.async, not the bulk engine): `bytes` = 4 copies the
// word, 0 writes zero (the source is not read). Completion is tracked per thread by
// cp_async_mbar_arrive.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, uint32_t bytes) {
#if DSKC_SM90A
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
#endif
}
// One arrival on `bar` once every cp.async this thread issued before has landed (.noinc: the arrival
// counts against the count the barrier was initialized with).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
#if DSKC_SM90A
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

// 2-D bulk tensor copy shared -> global: the box at `src` (the layout a load of the same box would
// leave: 128-byte rows, swizzled) to (c0, c1) of the tensor map; rows past the tensor's end are not
// written. One commit group per `tma_store_commit`; `tma_store_wait_read<N>` returns once all but the
// newest N groups of this thread have read their shared memory (it may be overwritten), and
// `tma_store_wait<0>` once every store of this thread is complete. Threads that wrote the box with
// ordinary stores must `fence_proxy_async` (and synchronize with the issuing thread) first.
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* map, uint32_t src, int c0, int c1) {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
#endif
}
// 3-D form of tma_store_2d: elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_3d(const TmaDescriptor* map, uint32_t src, int c0, int c1, int c2) {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
#endif
}
// Adds a box from shared memory into global memory element by element (fp32 add in L2; elements
// outside the tensor are skipped), in the same bulk groups as tma_store_*: the order of concurrent
// reductions into one element is not fixed.
__device__ __forceinline__ void tma_reduce_add_3d(const TmaDescriptor* map, uint32_t src, int c0, int c1, int c2) {
#if DSKC_SM90A
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
#endif
}
__device__ __forceinline__ void tma_store_commit() {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
#if DSKC_SM90A
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async() {
#if DSKC_SM90A
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Four 8x8 16-bit matrices from registers into shared memory (lanes 8j..8j+7 address the rows of
// matrix j; lane l holds row l/4, columns 2(l%4), +1 of each: the accumulator fragment layout).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
#if DSKC_SM90A
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}
// A warpgroup's 64 x 64 16-bit tile from registers into shared memory as one 128B-swizzled TMA box
// (`tile` 1024-aligned, 128-byte rows: what a TMA load of the box would leave). pk[i] holds the
// thread's elements of columns 16i .. 16i + 15 in the wgmma accumulator order, which is also the
// m64nNk16 A-fragment layout of k step i: warp w of the warpgroup, lane 4g + t, pk[i][0] row 16w + g,
// columns 16i + 2t (+1); [1] row 16w + g + 8; [2], [3] the same rows, columns + 8 (flash::pack_acc64).
// Conflict-free: each 8 x 8 matrix's rows land in eight different 16-byte bank groups.
__device__ __forceinline__ void stmatrix_tile64(uint32_t tile, const uint32_t (&pk)[4][4]) {
  const int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4;
  const int row = 16 * w + ((lane >> 3) & 1) * 8 + (lane & 7);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int chunk = 2 * i + (lane >> 4);
    stmatrix_x4(tile + row * 128 + ((chunk ^ (lane & 7)) << 4), pk[i]);
  }
}
// 16 bytes from shared memory (a shared-window address), ordered after earlier barriers' waits.
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// Its inverse: the same addresses give every lane back the pairs it would store.
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
#if DSKC_SM90A
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#endif
}
// Warp-specialized register split: a warpgroup gives registers back to the block's pool (.dec) or
// takes them (.inc, waits until the pool has them); every warp of the warpgroup executes it.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if DSKC_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if DSKC_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
// Named barriers (ids 1-15; 0 is __syncthreads): bar.sync waits until kCount threads have arrived
// at barrier kId, bar.arrive arrives without waiting.
template <int kId, int kCount>
__device__ __forceinline__ void named_sync() {
#if DSKC_SM90A
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
#endif
}
template <int kId, int kCount>
__device__ __forceinline__ void named_arrive() {
#if DSKC_SM90A
  asm volatile("bar.arrive %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
#endif
}
// The 128 threads of math warpgroup wg (0 or 1): named barrier 1 + wg.
__device__ __forceinline__ void warpgroup_sync(int wg) { wg == 0 ? named_sync<1, 128>() : named_sync<2, 128>(); }
// Hand-over between the two math warpgroups (named barriers 3 + wg, 256 threads): warpgroup `wg`
// waits for its turn (turn_wait) until the other one has called turn_give(wg).
__device__ __forceinline__ void turn_wait(int wg) { wg == 0 ? named_sync<3, 256>() : named_sync<4, 256>(); }
__device__ __forceinline__ void turn_give(int wg) { wg == 0 ? named_arrive<3, 256>() : named_arrive<4, 256>(); }

// A kernel's compile-time cluster size (x CTAs) where the arch has clusters (sm_90+); the generated
// source uses it for cluster kernels (compiler/codegen.cpp), which also compile standalone for sm_80.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DSKC_CLUSTER_DIMS(x)
#else
#define DSKC_CLUSTER_DIMS(x) __cluster_dims__(x, 1, 1)
#endif

// Thread-block clusters: the cluster-wide barrier (every thread of every CTA of the cluster arrives,
// then waits; arrive and wait alternate per thread), and 16-byte stores into a peer CTA's shared
// memory (distributed shared memory: `addr` in this CTA's shared window, mapped to CTA `rank`).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if DSKC_SM90A
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive_release() {
#if DSKC_SM90A
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if DSKC_SM90A
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void st_cluster_f4(uint32_t addr, uint32_t rank, float4 v) {
#if DSKC_SM90A
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(remote), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
#endif
}

// Point-to-point hand-over between the CTAs of a cluster: st_async_f4 writes 16 bytes into CTA
// `rank`'s shared memory at this CTA's offset `addr` and completes 16 bytes of transactions on that
// CTA's mbarrier at offset `bar` (which its owner armed with mbar_arrive_expect_tx); mbar_wait_cluster
// waits on a local mbarrier that other CTAs complete or arrive on (acquire at cluster scope: their
// writes are visible after it); mbar_arrive_remote arrives on CTA `rank`'s mbarrier at offset `bar`,
// ordering this thread's earlier accesses before it (release at cluster scope).
__device__ __forceinline__ void st_async_f4(uint32_t addr, uint32_t bar, uint32_t rank, float4 v) {
#if DSKC_SM90A
  uint32_t raddr, rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(raddr) : "r"(addr), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rbar) : "r"(bar), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(raddr),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)), "r"(__float_as_uint(v.w)),
               "r"(rbar)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
#if DSKC_SM90A
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar, uint32_t rank) {
#if DSKC_SM90A
  uint32_t rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rbar) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(rbar) : "memory");
#endif
}

// Shared-memory matrix descriptor of a K-major, 128B-swizzled operand tile starting at `addr`.
__device__ __forceinline__ uint64_t wgmma_desc_k128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// The same layout read N-major (B = [k][n] with n contiguous: 64-element rows of 128 bytes, one
// row per k, 128B-swizzled as TMA writes a [k rows][64 columns] box), for wgmma's transposed-B
// form (imm-tnsp-b = 1). Canonical layout ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in elements: with
// N = 64 there is one 64-wide block (the LBO stride is never used) and SBO = 1024 bytes between
// 8-row groups of k; both fields are set to 1024. A k16 step advances the start by 16 rows (2048 B).
// Wider operands (gemm_sm90's N-major B: N = 128 as two [k][64] boxes) pass the bytes between their
// 64-wide blocks as `lbo` (the LBO field of the canonical MN-major 128B-swizzled layout
// ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte units).
__device__ __forceinline__ uint64_t wgmma_desc_mn128(uint32_t addr, uint32_t lbo = 1024) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// `desc` (either form above) moved `bytes` further into its tile: only the 14-bit start-address field
// (16-byte units) in the low word changes, and no tile crosses the field's 256 KB range, so the low
// word takes no carry. One uniform add per wgmma instead of rebuilding the descriptor from the
// address (a mask, a shift and two ors: ~6 uniform instructions per descriptor in the k loops).
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(desc) + (bytes >> 4));
}

// Pins accumulator registers in program order around the asynchronous wgmmas: the compiler may not
// move their reads (the epilogue) above a wgmma_wait, nor their writes (zeroing) below a wgmma.
template <int kN>
__device__ __forceinline__ void fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() {
#if DSKC_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if DSKC_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if DSKC_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

#define DSKC_F8(d, i)                                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
// The 64 accumulator operands of an m64n128 wgmma.
#define DSKC_WGMMA_D64                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "    \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define DSKC_F64(d) \
  DSKC_F8(d, 0), DSKC_F8(d, 8), DSKC_F8(d, 16), DSKC_F8(d, 24), DSKC_F8(d, 32), DSKC_F8(d, 40), DSKC_F8(d, 48), DSKC_F8(d, 56)

// D[64x128] += A[64x16] · B[128x16]ᵀ, both K-major in shared memory (descriptors), fp32 accumulate;
// kTnspB = 1: B read N-major instead (B stored [k][n] with n contiguous, wgmma_desc_mn128 with the
// 64-wide blocks' distance as LBO; imm-tnsp-b = 1), D += A · B[16x128]. Accumulator layout (PTX
// ISA, wgmma D fragments): thread t of the warpgroup, w = t / 32, l = t % 32, holds for each
// 8-column group g (0-15) d[4g], d[4g+1] = (row 16w + l/4, cols 8g + 2(l%4), +1) and d[4g+2],
// d[4g+3] = the same columns of row 16w + l/4 + 8.
template <typename E, int kTnspB = 0>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  static_assert(kTnspB == 0 || kTnspB == 1, "imm-tnsp-b is 0 or 1");
#if DSKC_SM90A
  if constexpr (SameType<E, __half>::value) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " DSKC_WGMMA_D64 ", %64, %65, 1, 1, 1, 0, %66;\n"
        : DSKC_F64(d)
        : "l"(desc_a), "l"(desc_b), "n"(kTnspB));
  } else {
    static_assert(SameType<E, __nv_bfloat16>::value, "wgmma operands are fp16 or bf16");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DSKC_WGMMA_D64 ", %64, %65, 1, 1, 1, 0, %66;\n"
        : DSKC_F64(d)
        : "l"(desc_a), "l"(desc_b), "n"(kTnspB));
  }
#endif
}

// The 32 accumulator operands of an m64n64 wgmma.
#define DSKC_WGMMA_D32                                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define DSKC_F32(d) DSKC_F8(d, 0), DSKC_F8(d, 8), DSKC_F8(d, 16), DSKC_F8(d, 24)

// D[64x64] (+)= A[64x16] · B[64x16]ᵀ, both K-major in shared memory; `accumulate` = 0 overwrites D
// (scale-d). kTnsp = 1: both read M/N-major instead (wgmma_desc_mn128: A stored [k][m] with m
// contiguous, B [k][n] with n contiguous; imm-tnsp-a = imm-tnsp-b = 1), D[64x64] (+)= A · B[16x64].
// D layout: thread t, w = t / 32, l = t % 32 holds for 8-column group j (0-7) d[4j], d[4j+1]
// = (row 16w + l/4, cols 8j + 2(l%4), +1) and d[4j+2], d[4j+3] = row + 8.
template <typename E, int kTnsp = 0>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(kTnsp == 0 || kTnsp == 1, "imm-tnsp is 0 or 1");
#if DSKC_SM90A
  if constexpr (SameType<E, __half>::value) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " DSKC_WGMMA_D32 ", %32, %33, p, 1, 1, %35, %35;\n}\n"
        : DSKC_F32(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTnsp));
  } else {
    static_assert(SameType<E, __nv_bfloat16>::value, "wgmma operands are fp16 or bf16");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DSKC_WGMMA_D32 ", %32, %33, p, 1, 1, %35, %35;\n}\n"
        : DSKC_F32(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTnsp));
  }
#endif
}
// D[64x64] += A[64x16] · B[16x64], A from registers (four 16-bit pairs per thread in the layout of
// mma.m16n8k16's A fragment, warp w holding rows 16w..16w+15: the accumulator layout above, packed
// per k16 step), B N-major in shared memory (wgmma_desc_mn128, imm-tnsp-b = 1).
template <typename E>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tn(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
#if DSKC_SM90A
  if constexpr (SameType<E, __half>::value) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " DSKC_WGMMA_D32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : DSKC_F32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    static_assert(SameType<E, __nv_bfloat16>::value, "wgmma operands are fp16 or bf16");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DSKC_WGMMA_D32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : DSKC_F32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
#endif
}

}  // namespace sm90
}  // namespace dskc
