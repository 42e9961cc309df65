from replay import *
from live import *
d=load('../../synth33/m05_npu_qwen25_7b_serve_card3.pkl')
L=live_at(d,3,39948); sites(L,6)
print(len(d['device_traces']), [len(x) for x in d['device_traces']])
a0,r0,A,R=curve(d,3); print('returns to base', [i for i in range(1,len(A)) if A[i]==a0 and A[i-1]!=a0][:20])
