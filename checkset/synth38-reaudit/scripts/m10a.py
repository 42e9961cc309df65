from util import *
d = load('m10'); r = Replay(d, 0); T = d['device_traces'][0]
gh = sorted(r.ghosts.items(), key=lambda kv:-kv[1][0])
print('ghosts', len(gh), sum(v[0] for k,v in gh), [v[0] for k,v in gh[:6]], [bool(v[1]) for k,v in gh[:6]])
print(550800000/(400000*17*81), 131200000/400000/4)
# bursts of segment_free
bursts=[]; cur=[]
for i,e in enumerate(T):
    if e['action']=='segment_free':
        if cur and i-cur[-1]>1: bursts.append(cur); cur=[]
        cur.append(i)
if cur: bursts.append(cur)
for b in bursts:
    s,e_=b[0],b[-1]; rel=sum(T[i]['size'] for i in b)
    nxt=T[e_+1]; nxt2=T[e_+2]; prev=T[s-1]
    print('burst',s,e_,len(b),g(rel),'res before',g(r.res_curve[s-1]),'after',m(r.res_curve[e_]),'alloc',m(r.alloc_curve[s-1]),m(r.alloc_curve[e_]),'next',nxt['action'],nxt['size'],m(nxt['size']),nxt2['action'],m(nxt2['size']),
          'dt ms %.1f'%((nxt2['time_us']-prev['time_us'])/1000), 'dt from first free %.1f'%((nxt2['time_us']-T[s]['time_us'])/1000), 'frames', fr(nxt2)[:2], 'sfframes', fr(T[s])[:2])
    # free cached in large pool before burst
