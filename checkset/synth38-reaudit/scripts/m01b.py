from util import *
d=load('m01'); T=d['device_traces'][0]
for i in [9962, 56964, 56989, 56990]:
    e=T[i]; fs=fr(e)
    print(i, e['action'], e['size'], [f for f in fs if not f.startswith('torch::unwind') and 'CachingAllocator' not in f and 'gather' not in f.split('(')[0] or 'gather_backward' in f or 'SumBackward' in f or 'utils.py' in f or '.py' in f][:14])
    print()
