"""GE tensor enums as msprof names them in op_summary (tensor_info / tensor_data_info data type and format).

Values are GE's ``ge::DataType`` and ``ge::Format`` (msprof ``ge_enum_constant.py``, C++ ``number_mapping.cpp``).
A format word carries a sub-format in bits 8–23 (grouped convolution weights, for one): msprof prints
``FRACTAL_Z:2`` for ``4 | 2 << 8``. An id without a name prints as its number, as msprof's C++ exporter does.
"""

from __future__ import annotations

UNDEFINED = 0xFFFFFFFF  # "no value" in both enums

_DATA_TYPES = (
    "FLOAT FLOAT16 INT8 INT32 UINT8 - INT16 UINT16 UINT32 INT64 UINT64 DOUBLE BOOL STRING DUAL_SUB_INT8 "
    "DUAL_SUB_UINT8 COMPLEX64 COMPLEX128 QINT8 QINT16 QINT32 QUINT8 QUINT16 RESOURCE STRING_REF DUAL DT_VARIANT "
    "DT_BF16 DT_UNDEFINED DT_INT4 DT_UINT1 DT_INT2 DT_UINT2 DT_COMPLEX32 DT_HIFLOAT8 DT_FLOAT8_E5M2 DT_FLOAT8_E4M3FN "
    "DT_FLOAT8_E8M0 DT_FLOAT6_E3M2 DT_FLOAT6_E2M3 DT_FLOAT4_E2M1 DT_FLOAT4_E1M2 DT_MAX"
).split()
_NUMBER_TYPES = (  # from 229
    "NUMBER_TYPE_BEGIN_ BOOL_ INT_ INT8_ INT16_ INT32_ INT64_ UINT_ UINT8_ UINT16_ UINT32_ UINT64_ FLOAT_ FLOAT16_ "
    "FLOAT32_ FLOAT64_ COMPLEX_ NUMBER_TYPE_END_"
).split()
DATA_TYPES: dict[int, str] = {i: name for i, name in enumerate(_DATA_TYPES) if name != "-"}
DATA_TYPES.update({229 + i: name for i, name in enumerate(_NUMBER_TYPES)})
DATA_TYPES[UNDEFINED] = "UNDEFINED"

_FORMATS = (
    "NCHW NHWC ND NC1HWC0 FRACTAL_Z NC1C0HWPAD NHWC1C0 FSR_NCHW FRACTAL_DECONV C1HWNC0 FRACTAL_DECONV_TRANSPOSE "
    "FRACTAL_DECONV_SP_STRIDE_TRANS NC1HWC0_C04 FRACTAL_Z_C04 CHWN FRACTAL_DECONV_SP_STRIDE8_TRANS HWCN NC1KHKWHWC0 "
    "BN_WEIGHT FILTER_HWCK HASHTABLE_LOOKUP_LOOKUPS HASHTABLE_LOOKUP_KEYS HASHTABLE_LOOKUP_VALUE "
    "HASHTABLE_LOOKUP_OUTPUT HASHTABLE_LOOKUP_HITS C1HWNCoC0 MD NDHWC FRACTAL_ZZ FRACTAL_NZ NCDHW DHWCN NDC1HWC0 "
    "FRACTAL_Z_3D CN NC DHWNC FRACTAL_Z_3D_TRANSPOSE FRACTAL_ZN_LSTM FRACTAL_Z_G RESERVED ALL NULL ND_RNN_BIAS "
    "FRACTAL_ZN_RNN NYUV NYUV_A NCL FRACTAL_Z_WINO C1HWC0 FRACTAL_NZ_C0_16 FRACTAL_NZ_C0_32 FRACTAL_NZ_C0_2 "
    "FRACTAL_NZ_C0_4 FRACTAL_NZ_C0_8 END"
).split()
_INTERNAL_FORMATS = (  # from 200
    "UNKNOWN_ DEFAULT_ NC1KHKWHWC0_ ND_ NCHW_ NHWC_ HWCN_ NC1HWC0_ FRAC_Z_ C1HWNCOC0_ FRAC_NZ_ NC1HWC0_C04_ "
    "FRACTAL_Z_C04_ NDHWC_ FRACTAL_ZN_LSTM_ FRACTAL_ZN_RNN_ ND_RNN_BIAS_ NDC1HWC0_ NCDHW_ FRACTAL_Z_3D_ DHWNC_ DHWCN_"
).split()
FORMATS: dict[int, str] = dict(enumerate(_FORMATS))
FORMATS.update({200 + i: name for i, name in enumerate(_INTERNAL_FORMATS)})
FORMATS[0xFF] = "MAX"


def data_type_name(value: int) -> str:
    return DATA_TYPES.get(value, str(value))


def format_name(value: int) -> str:
    """`FRACTAL_Z`, or `FRACTAL_Z:2` when a sub-format is set (bits 8–23)."""
    if value == UNDEFINED:
        return "UNDEFINED"
    primary, sub = value & 0xFF, (value & 0xFFFF00) >> 8
    name = FORMATS.get(primary, str(primary))
    return f"{name}:{sub}" if sub else name
