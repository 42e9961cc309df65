from replay import *
from live import *
d=load('../../synth33/m02_swinunetr_totalseg_v100.pickle'); t=d['device_traces'][0]
print('retry dt ms',(t[25342]['time_us']-t[25334]['time_us'])/1000)
L=live_at(d,0,12727); sites(L)
import collections
a0,r0,A,R=curve(d,0)
# volume boundaries: where allocated returns to weights
base=428576032
lows=[i for i in range(1,len(A)) if A[i]==base and A[i-1]!=base]
print('returns to weights at',lows)
print('alloc at 12578',A[12578], 'max A before 12703', max(A[:12700]))
