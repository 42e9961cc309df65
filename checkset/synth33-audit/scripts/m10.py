from replay import *
from live import *
d=load('../../synth33/m10_timesformer_k400_lion.pickle'); t=d['device_traces'][0]
L=live_at(d,0,4774); sites(L,5)
ann=d.get('external_annotations'); print(type(ann), len(ann)); print([ (a.get('name'),a.get('stage'),a.get('time_us')) for a in ann[:4]])
ps=[a for a in ann if str(a.get('name','')).startswith('ProfilerStep') and a.get('stage')=='START']
import bisect
times=[e['time_us'] for e in t]
bnd=[bisect.bisect_left(times,a['time_us']) for a in ps]; print('step starts',bnd)
a0,r0,A,R=curve(d,0); b=bnd+[len(A)]
print('highs',[max(A[b[k]:b[k+1]]) for k in range(len(b)-1)])
print('lows',[min(A[b[k]:b[k+1]]) for k in range(len(b)-1)])
sa=[i for i,e in enumerate(t) if e['action']=='segment_alloc' and i>15768]; print('segallocs after ec',len(sa),sum(t[i]['size'] for i in sa), sa[-1])
