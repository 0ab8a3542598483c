# The causal self-attention module of the attention bundle (bench/cpu/attention.sh) as HLO text:
#   python3 gen.py B S H D f32|bf16 > m.hlo   (q, k, v [B, S, H, D]; softmax in f32; -inf mask)
import sys
B,S,H,D,dt=int(sys.argv[1]),int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]),sys.argv[5]
sh=f"{B},{H},{S},{S}"
print(f"""HloModule causal
mx {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  q = {dt}[{B},{S},{H},{D}] parameter(0)
  k = {dt}[{B},{S},{H},{D}] parameter(1)
  v = {dt}[{B},{S},{H},{D}] parameter(2)
  s = {dt}[{sh}] dot(q, k), lhs_batch_dims={{0,2}}, lhs_contracting_dims={{3}}, rhs_batch_dims={{0,2}}, rhs_contracting_dims={{3}}
  sf = f32[{sh}] convert(s)
  c = f32[] constant(0.125)
  cb = f32[{sh}] broadcast(c), dimensions={{}}
  sc = f32[{sh}] multiply(sf, cb)
  iq = s32[{sh}] iota(), iota_dimension=2
  ik = s32[{sh}] iota(), iota_dimension=3
  ok = pred[{sh}] compare(ik, iq), direction=LE
  ninf = f32[] constant(-inf)
  nb = f32[{sh}] broadcast(ninf), dimensions={{}}
  e = f32[{sh}] select(ok, sc, nb)
  m = f32[{B},{H},{S}] reduce(e, ninf), dimensions={{3}}, to_apply=mx
  mb = f32[{sh}] broadcast(m), dimensions={{0,1,2}}
  d = f32[{sh}] subtract(e, mb)
  x = f32[{sh}] exponential(d)
  z = f32[] constant(0)
  l = f32[{B},{H},{S}] reduce(x, z), dimensions={{3}}, to_apply=add
  lb = f32[{sh}] broadcast(l), dimensions={{0,1,2}}
  p = f32[{sh}] divide(x, lb)
  pc = {dt}[{sh}] convert(p)
  o = {dt}[{B},{H},{S},{D}] dot(pc, v), lhs_batch_dims={{0,1}}, lhs_contracting_dims={{3}}, rhs_batch_dims={{0,2}}, rhs_contracting_dims={{1}}
  ROOT t = {dt}[{B},{S},{H},{D}] transpose(o), dimensions={{0,2,1,3}}
}}""")
