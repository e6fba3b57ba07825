"""The machinery every primitive shares: abstract values (`avals`), the
vmap rules (`batching`), the sharding rules (`partitioning`), the
trace-time checks (`validate`), the FFI calls and eager implementation
(`ffi_call`), and loading the compiled extension (`native`).

Nothing here knows a particular norm; `jax_lngb._ops` builds the
primitives on it.
"""
