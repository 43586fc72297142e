# The value types the kernels are specialised for, shared by every .pyx (cimport them).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

ctypedef fused number_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    float
    double
    float complex
    double complex

ctypedef fused real_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    float
    double

# The value types of add's fused merge (a sum of two values of one type, complex included).
ctypedef fused value_t:
    int32_t
    int64_t
    float
    double
    float complex
    double complex
