"""A scenario script over the Northwind week: what YAML cannot say.

    coworkenv simulate examples/simulations/week_script.py

It runs beside the simulation (deterministically: the simulation waits at each `await`),
reads the workspace and the arrivals graded so far, injects a message and an extra request,
and records its own checks with the simulation's.
"""

SIMULATION = "week.yaml"


async def scenario(sim):
    # Tuesday morning the CEO pings the assistant directly (a message nobody scripted in YAML)
    sim.at("d2 09:30", lambda: sim.say("elena", "assistant", "Morning! Anything urgent for me?"))
    # an extra VPN escalation on Thursday afternoon, routed to the IT helpdesk agent
    sim.add_task("it-vpn", to="it", at="d4 15:00")
    # every working hour: how many requests are waiting or in work
    backlog = []
    sim.every(60, lambda: backlog.append(sim.open), start="d1 09:00")
    # wait until the first hundred requests are graded
    await sim.until(lambda: len(sim.outcomes) >= 100)
    sim.check("hundred-by-wednesday", sim.now.weekday() <= 2,
              f"the 100th request was graded on {sim.now:%A %H:%M}")
    # then until the mail outage is over, and look at the mail sent during it
    await sim.until(lambda: sim.seconds >= sim.time("d3 11:00"))
    sim.check("backlog-bounded", max(backlog) <= 12, f"largest hourly backlog {max(backlog)}")
    new_hire = sim.workspace.people.get("mira")
    sim.check("mira-joined", new_hire is not None, "Mira is in the directory after d3 09:00")
