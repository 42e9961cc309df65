import pickle,sys
d=pickle.load(open(sys.argv[1],'rb'))
print(type(d), list(d.keys()) if isinstance(d,dict) else None)
print({k:(type(v),len(v) if hasattr(v,'__len__') else v) for k,v in d.items()})
s=d['segments'][0]; print({k:v for k,v in s.items() if k!='blocks'}); b=s['blocks'][0]; print(b.keys(), {k:v for k,v in b.items() if k!='frames'}, b.get('frames',[])[:3])
for i,t in enumerate(d['device_traces']):
    if t: print(i,len(t), t[0].keys(), [ {k:v for k,v in e.items() if k!='frames'} for e in t[:3]]); print(t[0].get('frames',[])[:4])
print(d.get('allocator_settings')); print(str(d.get('external_annotations'))[:300])
