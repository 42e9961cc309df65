import sys; sys.path.insert(0,'../../synth33-audit/scripts')
from replay import *
d=load('../../synth33/m02_swinunetr_totalseg_v100.pickle'); t=d['device_traces'][0]; e=t[25342]
f=final(d,0); cache_free=f['reserved']-f['alloc_size']
print('request',e['size'],'device_free',e['device_free'],'cache free',cache_free,'sum',e['device_free']+cache_free, 'frames',[(x['name'],x['filename'].split('/')[-1],x['line']) for x in e['frames']])
