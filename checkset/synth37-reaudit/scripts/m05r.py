import rp, collections
d = rp.load('m05'); r = rp.R(d, 0); T = r.T
sf=[i for i in range(27356,27504) if T[i]['action']=='segment_free']
rs = T[27504]['stream']; print(T[27504]['action'], rp.m(T[27504]['size']), rs)
print(len(sf), sum(1 for i in sf if T[i]['stream']!=rs), rp.g(sum(T[i]['size'] for i in sf)))
print(collections.Counter(T[i]['stream'] for i in sf))
# other stalls
allsf=[i for i,e in enumerate(T) if e['action']=='segment_free']
bursts=[]; 
for i in allsf:
    if bursts and i-bursts[-1][-1]<=1: bursts[-1].append(i)
    else: bursts.append([i])
for b in bursts:
    j=b[-1]+1
    while T[j]['action'] not in ('segment_alloc','alloc'): j+=1
    print(b[0], b[-1], len(b), 'other', sum(1 for i in b if T[i]['stream']!=T[j]['stream']), T[j]['action'], rp.m(T[j]['size']), 'dt', (T[j]['time_us']-T[b[0]]['time_us'])/1e3 if 'time_us' in T[j] else None)
print([f['name'] for f in T[27504]['frames']][:6], [f['line'] for f in T[27504]['frames']][:6])
