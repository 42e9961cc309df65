from util import *
d=load('m06'); r=Replay(d,0); T=r.T; n=len(T)
sa=[i for i,e in enumerate(T) if e['action']=='segment_alloc']
print('segallocs near 18801', [i for i in sa if 17000<i<19000])
print('res 18786', g(r.res_curve[18786]), 'res 18802', g(r.res_curve[18802]), 'max res', g(r.max_reserved), 'at', max(range(n), key=lambda i:r.res_curve[i]))
print('max alloc 3605-17240', g(max(r.alloc_curve[3605:17241])), 'res', g(r.res_curve[17240]), r.alloc_curve[17240])
print('max alloc within 18787-18802', max(r.alloc_curve[18787:18803]))
sf=[i for i,e in enumerate(T) if e['action']=='segment_free']
print('segfree', sf[0], sf[-2], len(sf)-1, g(sum(T[i]['size'] for i in sf[:-1])), 'last', sf[-1], m(T[sf[-1]]['size']), fr(T[sf[0]])[:2])
print('max alloc 18803..emptycache', max(r.alloc_curve[18803:sf[0]]), g(max(r.alloc_curve[18803:sf[0]])))
print('max alloc after 18802', g(max(r.alloc_curve[18803:])))
print('res after ec', m(r.res_curve[sf[-2]]), 'alloc', m(r.alloc_curve[sf[-2]]))
print('new seg after ec', g(sum(T[i]['size'] for i in sa if i>sf[-2])))
o=T[-1]; print('oom', o['size'], m(o['size']), o['device_free'], m(o['device_free']), 'res', g(r.res_curve[-1]), 'alloc', g(r.alloc_curve[-1]))
print('res+devfree', g(r.res_curve[-1]+o['device_free']), 'diff', r.max_reserved-(r.res_curve[-1]+o['device_free']))
print('oom frames', fr(o)[:5])
print('time ec->oom s', (o['time_us']-T[sf[0]]['time_us'])/1e6)
# count blocks of this size made in failing pass and prior pass
sz=o['size']
idx=[i for i,e in enumerate(T) if e['action']=='alloc' and e['size']==sz]
print('allocs of oom size', len(idx), idx[-10:])
