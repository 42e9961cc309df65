import sys, collections; sys.path.insert(0,'../../synth33-audit/scripts')
from replay import *; from live import *
d=load('../../synth33/m04_specdec_llama2_13b_2gpu.pickle')
for dev,idx in [(0,18761),(1,44148)]:
    L=live_at(d,dev,idx)
    kv=sum(sz for sz,fr,_ in L.values() if any('cache_utils' in f['filename'] for f in fr))
    print('dev',dev,'kv at peak',kv,round(kv/2**20,1),'MiB')
