/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* schedlab's stand-in for libbpf's <bpf/bpf_endian.h> (little-endian host). */
/*
 * BPF-target mode (clang -target bpf, which predefines __BPF__): libbpf's
 * own header, found after this directory in the include path.
 */
#if defined(__BPF__) && !defined(__SCHEDLAB_NATIVE__)
#include_next <bpf/bpf_endian.h>
#else

#ifndef __SCHEDLAB_BPF_ENDIAN_H__
#define __SCHEDLAB_BPF_ENDIAN_H__

#define bpf_htons(x) __builtin_bswap16(x)
#define bpf_ntohs(x) __builtin_bswap16(x)
#define bpf_htonl(x) __builtin_bswap32(x)
#define bpf_ntohl(x) __builtin_bswap32(x)
#define bpf_cpu_to_be64(x) __builtin_bswap64(x)
#define bpf_be64_to_cpu(x) __builtin_bswap64(x)

#endif

#endif /* __BPF__ */
