/* chacha20.h — the ChaCha20 block function of RFC 8439 (§2.3), for the host and the device.

   state = "expand 32-byte k" (4 words), the 256-bit key (8 words, little-endian), a 32-bit block counter,
   a 96-bit nonce (3 words); 20 rounds (10 column + diagonal double rounds of the quarter round of §2.1);
   the output is the rounds' state plus the input state, 16 words (serialized little-endian: 64 bytes of
   keystream). Integer additions, xors and rotations only: constant time, the same bits on every
   machine. tests/test_secure_noise.c holds it to RFC 8439's vectors (§2.3.2's block, §2.4.2's
   keystream). The DP noise's use of it (key, counter and nonce words): kernels/secure_noise.h.
   Not here: encryption, Poly1305, anything stateful. */
#ifndef CHACHA20_H
#define CHACHA20_H

#include <stdint.h>

#ifdef __CUDACC__
#define CHACHA20_FN static inline __host__ __device__
#elif defined(__GNUC__)
#define CHACHA20_FN static inline __attribute__((always_inline))   /* into the vector loops of secure_noise.c */
#else
#define CHACHA20_FN static inline
#endif

#define CHACHA20_ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define CHACHA20_QR(x, a, b, c, d)                                                   \
    do {                                                                             \
        x[a] += x[b]; x[d] ^= x[a]; x[d] = CHACHA20_ROTL(x[d], 16);                  \
        x[c] += x[d]; x[b] ^= x[c]; x[b] = CHACHA20_ROTL(x[b], 12);                  \
        x[a] += x[b]; x[d] ^= x[a]; x[d] = CHACHA20_ROTL(x[d], 8);                   \
        x[c] += x[d]; x[b] ^= x[c]; x[b] = CHACHA20_ROTL(x[b], 7);                   \
    } while (0)

/* out = ChaCha20(key, counter, nonce): the 16 words of one keystream block. */
CHACHA20_FN void chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[16]) {
    uint32_t in[16] = { 0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                        key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
                        counter, nonce[0], nonce[1], nonce[2] };
    uint32_t x[16];
    for (int i = 0; i < 16; i++) x[i] = in[i];
    for (int r = 0; r < 10; r++) {
        CHACHA20_QR(x, 0, 4, 8, 12); CHACHA20_QR(x, 1, 5, 9, 13); CHACHA20_QR(x, 2, 6, 10, 14); CHACHA20_QR(x, 3, 7, 11, 15);
        CHACHA20_QR(x, 0, 5, 10, 15); CHACHA20_QR(x, 1, 6, 11, 12); CHACHA20_QR(x, 2, 7, 8, 13); CHACHA20_QR(x, 3, 4, 9, 14);
    }
    for (int i = 0; i < 16; i++) out[i] = x[i] + in[i];
}

#endif
