from replay import *
from live import *
d=load('../../synth33/m04_specdec_llama2_13b_2gpu.pickle')
for dev,idx in [(0,18761),(1,44148)]:
    L=live_at(d,dev,idx); print('dev',dev,sum(v[0] for v in L.values())); sites(L,5)
    a0,r0,A,R=curve(d,dev); base=A[0] if False else a0
    lows=[i for i in range(1,len(A)) if A[i]==a0 and A[i-1]!=a0]; print(' returns to base at',lows)
