from util import *
d=load('m06'); r=Replay(d,0); T=r.T; n=len(T)
sa=[i for i,e in enumerate(T) if e['action']=='segment_alloc']
print('segalloc 18803..21214', [i for i in sa if 18802<i<21215], 'after 18802 total', len([i for i in sa if i>18802]))
print('max alloc 18803..21214', max(r.alloc_curve[18803:21215]))
print('max alloc 18803..end', max(r.alloc_curve[18803:]))
print('ec frames', fr(T[21215])[:3])
print('other segfree before 21215', [i for i,e in enumerate(T) if e['action']=='segment_free' and i<21215])
