# Ego-small graph generation (RMwGGIS Table 2): RMwGGIS (advanced, s = 50) vs EBM(GWG).
.PHONY: table-graph-generation
table-graph-generation: $(STAMP) ## Ego-small MMD table (degree/clustering/orbit/avg) + generated-graph figures (RMwGGIS Table 2)
	$(SWEEP) experiment=rmwggis/table2_graphs scale=$(SCALE) $(ARGS)
	$(SWEEP) experiment=rmwggis/table2_graphs_gwg scale=$(SCALE) $(ARGS) && $(REPORT) table rmwggis/table2_graphs --scale $(SCALE)
